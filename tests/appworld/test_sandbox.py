"""The OS boundary around agent code (bubblewrap): what AppWorld's Python-level guard cannot stop
- ``io.FileIO``, libc's ``open`` through ctypes, a raw ``openat`` syscall, ``fork``, threads,
sockets, ``/proc`` - reaches no ground truth, key, user file, other task's data, process,
variable or network. Every route first proves it works on something the sandbox may see, so a
test can fail."""

from __future__ import annotations

import http.server
import os
import threading
from pathlib import Path

import gymnasium as gym
import pytest
from appworld_helpers import process_gone, task

from rubricgym.adapters.appworld.sandbox import BWRAP_ENV, SANDBOX_PATH, SandboxUnavailable

pytestmark = pytest.mark.slow
CANARY = "sk-canary-0123456789abcdef"
# routes around AppWorld's import check (it reads names, not values)
OS = "os = __import__('o' + 's')\nio = __import__('i' + 'o')\nfile = getattr(io, 'File' + 'IO')\n"
READERS = {
    "FileIO": "io = __import__('i' + 'o')\ndef read(path):\n    return getattr(io, 'File' + 'IO')(path).read()\n",
    "libc open": ("ct = __import__('cty' + 'pes')\nlibc = ct.CDLL(None, use_errno=True)\n"
                  "def read(path):\n    fd = libc.open(path.encode(), 0)\n"
                  "    assert fd >= 0, 'errno %d' % ct.get_errno()\n"
                  "    buf = ct.create_string_buffer(65536)\n    n = libc.read(fd, buf, 65536)\n"
                  "    libc.close(fd)\n    return buf.raw[:n]\n"),
    "openat syscall": ("ct = __import__('cty' + 'pes')\nlibc = ct.CDLL(None, use_errno=True)\n"
                       "def read(path):\n    fd = libc.syscall(257, -100, path.encode(), 0)\n"
                       "    assert fd >= 0, 'errno %d' % ct.get_errno()\n"
                       "    buf = ct.create_string_buffer(65536)\n    n = libc.read(fd, buf, 65536)\n"
                       "    libc.close(fd)\n    return buf.raw[:n]\n"),
}


def run(env, code: str) -> str:
    obs, _, terminated, truncated, info = env.step(f"<action>{code}</action>")
    assert not terminated and not truncated and "environment_failure" not in info, obs
    return obs


@pytest.fixture(scope="module")
def env():
    env = gym.make("AppWorld-Rubric-v0", reward="none", split="offline_all")
    env.reset(options={"task_id": task("answertopsender")["id"]})
    yield env
    env.close()


@pytest.mark.parametrize("route", READERS)
def test_no_route_reads_ground_truth_keys_or_user_files(env, route, tmp_path):
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": task("answertopsender")["id"]})
    truth = adapter.data_root / "data" / "tasks" / adapter.task_id / "ground_truth" / "answer.json"
    assert "Alan" in truth.read_text()
    key_file = tmp_path / "key.txt"
    key_file.write_text(CANARY)
    repo_file = Path.cwd() / "pyproject.toml"
    visible = adapter.data_root / "data" / "tasks" / adapter.task_id / "specs.json"
    reader = READERS[route]
    obs = run(env, reader + f"print(len(read({str(visible)!r})))")
    assert int(obs.strip().splitlines()[-1]) > 10, obs  # the route itself works
    for secret in (truth, key_file, repo_file, Path(f"/proc/{os.getpid()}/environ")):
        obs = run(env, reader + f"print(read({str(secret)!r}))")
        assert "Alan" not in obs and CANARY not in obs
        assert "No such file" in obs or "errno 2" in obs, obs


def test_agent_code_sees_only_its_own_processes_an_empty_environment_and_no_network(env, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CANARY", CANARY)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env.reset(options={"task_id": task("answertopsender")["id"]})
        host_pids = [p for p in (os.getpid(), os.getppid(), env.unwrapped.adapter.server.pid) if p > 300]
        obs = run(env, OS + "def exists(p):\n    try:\n        file('/proc/%d/stat' % p).close()\n        return True\n"
                  "    except OSError:\n        return False\n"
                  f"print(file('/proc/self/stat').read().split()[0].decode(), [p for p in range(1, 301) if exists(p)], "
                  f"[p for p in {host_pids} if exists(p)], sep='|')\n"
                  "print(file('/proc/self/environ').read().decode().replace(chr(0), ' '))\n"
                  "for p in range(1, 301):\n"
                  "    if exists(p):\n"
                  "        print('environ', p, file('/proc/%d/environ' % p).read())\n")
        lines = obs.strip().splitlines()
        assert lines[0][:1].isdigit(), obs
        pid, inside, host_visible = lines[0].split("|")
        assert int(pid) < 10 and len(eval(inside)) < 10 and eval(host_visible) == [], obs  # a PID namespace of its own
        names = {item.split("=", 1)[0] for item in lines[1].split()}
        assert names <= {"PATH", "HOME", "LANG", "APPWORLD_ROOT", "PYTHONUNBUFFERED", "PWD"}, names
        assert f"PATH={SANDBOX_PATH} " in lines[1] + " "  # its own, explicit PATH
        environs = dict(line.split(" ", 2)[1:] for line in lines if line.startswith("environ "))
        assert environs["1"] == "b''", environs  # bubblewrap, the sandbox's PID 1, was started with none
        assert os.environ["PATH"] not in obs and os.environ.get("HOME", "/root") + " " not in obs
        assert CANARY not in obs
        obs = run(env, OS + "so = __import__('soc' + 'ket')\n"
                  "try:\n"
                  f"    so.create_connection(('127.0.0.1', {server.server_port}), timeout=2)\n"
                  "    print('connected')\n"
                  "except OSError as e:\n"
                  "    print('refused', type(e).__name__)\n"
                  "print(file('/proc/net/dev').read().decode())")
        assert "refused" in obs and "connected" not in obs, obs
        interfaces = {line.split(":")[0].strip() for line in obs.splitlines() if ":" in line}
        assert interfaces == {"lo"}, obs  # no network but its own loopback
    finally:
        server.shutdown()
        server.server_close()


def test_agent_code_writes_only_its_outputs_folder(env, tmp_path):
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": task("answertopsender")["id"]})
    writer = "io = __import__('i' + 'o')\ndef write(path):\n    getattr(io, 'File' + 'IO')(path, 'w').write(b'pwned')\n"
    inside = adapter.outputs / "allowed.txt"
    obs = run(env, writer + f"write({str(inside)!r})\nprint('ok')")
    assert obs.strip().endswith("ok") and inside.read_bytes() == b"pwned"  # the route works
    targets = [tmp_path / "created.txt", adapter.data_root / "created.txt", Path.cwd() / "created.txt",
               adapter.data_root / "data" / "tasks" / adapter.task_id / "specs.json"]
    before = targets[-1].read_bytes()
    for target in targets:
        obs = run(env, writer + f"write({str(target)!r})")
        # under /tmp a write can land in the sandbox's own /tmp (a checkout there has its
        # mount points' parents in it): it never reaches the host (checked below)
        assert "Error" in obs or Path("/tmp") in target.parents, (target, obs)
    assert not any(t.exists() for t in targets[:-1]) and targets[-1].read_bytes() == before
    obs = run(env, writer + "write('/tmp/private.txt')\nprint('ok')")  # its own /tmp, not the host's
    assert obs.strip().endswith("ok") and not Path("/tmp/private.txt").exists()


def test_agent_code_sees_only_the_current_task_s_data(env):
    """Issue 54, item 6: a review read another task's ``phone.db`` from inside the sandbox. Of the
    data root the code sees the API docs and the current task's folder, without ground truth or
    databases (those are the apps' process's); nothing of any other task."""
    adapter = env.unwrapped.adapter
    current = task("answertopsender")["id"]
    other = next(t for t in adapter.task_ids() if t != current)
    env.reset(options={"task_id": current})
    tasks = adapter.data_root / "data" / "tasks"
    assert (tasks / other / "dbs" / "phone.db").exists() and (tasks / current / "dbs" / "phone.db").exists()
    lister = "os = __import__('o' + 's')\nprint('|'.join(sorted(e.name for e in getattr(os, 'scan' + 'dir')({!r}))))\n"
    obs = run(env, lister.format(str(tasks)))
    assert obs.strip().splitlines()[-1] == current, obs
    obs = run(env, lister.format(str(tasks / current)))
    assert obs.strip().splitlines()[-1] == "specs.json", obs
    reader = READERS["FileIO"]
    assert int(run(env, reader + f"print(len(read({str(tasks / current / 'specs.json')!r})))").split()[-1]) > 10
    for hidden in (tasks / other / "dbs" / "phone.db", tasks / other / "specs.json",
                   tasks / current / "dbs" / "phone.db", adapter.data_root / "rubricgym_index.json"):
        obs = run(env, reader + f"print(read({str(hidden)!r}))")
        assert "No such file" in obs, (hidden, obs)
    obs = run(env, lister.format(str(adapter.data_root / "experiments" / "outputs")))
    assert obs.strip().splitlines()[-1] == adapter.experiment_name, obs  # no other env's outputs
    env.reset(options={"task_id": other})  # the view follows the episode's task
    obs = run(env, lister.format(str(tasks)))
    assert obs.strip().splitlines()[-1] == other, obs


def test_a_thread_left_running_is_the_failure_of_the_step_that_started_it(env):
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": task("answertopsender")["id"]})
    pid = adapter.server.pid
    obs, reward, terminated, truncated, info = env.step(
        "<action>th = __import__('thre' + 'ading')\ndef burn():\n    while True:\n        pass\n"
        "getattr(th, 'Thr' + 'ead')(target=burn, daemon=True).start()\nprint('started')</action>")
    assert terminated and not truncated and reward == 0.0, obs
    assert "left work running" in info["policy_failure"] and "1 threads" in info["policy_failure"]
    assert info["transition"].facts.broke_engine and info["transition"].step == 0
    assert process_gone(pid, within_s=5.0)  # a thread cannot be killed alone: the sandbox was
    env.reset(options={"task_id": task("answertopsender")["id"]})  # a fresh server
    assert "1" in run(env, "print(1)")


def test_the_env_refuses_to_start_without_a_working_sandbox(monkeypatch):
    for bwrap in ("/nonexistent/bwrap", "/usr/bin/false"):
        monkeypatch.setenv(BWRAP_ENV, bwrap)
        with pytest.raises(SandboxUnavailable, match="sandbox=False") as refused:
            gym.make("AppWorld-Rubric-v0")
        assert "bubblewrap" in str(refused.value)
    unsandboxed = gym.make("AppWorld-Rubric-v0", sandbox=False)  # the explicit opt-out
    try:
        assert not unsandboxed.unwrapped.adapter.sandboxed and unsandboxed.unwrapped.adapter.evaluator is None
    finally:
        unsandboxed.close()
