"""Issue 54, items 1 and 2: what agent code holds in its sandbox is bounded as a whole, and work it
leaves running is charged to the step that started it.

Each attack of the issue, past the smallest memory cap AppWorld takes (1 GB): 1.2 GB written
into the sandbox's private ``/tmp`` (a tmpfs: memory that no process's resident set shows),
three child processes of 600 MB each (each under the per-process cap, 1.8 GB together), 200 MB
written into the outputs folder (past a 64 MB quota), and a busy child started by the step that
completes the task. Each ends as a scored policy failure of the step that did it, the sandbox
killed, and the next episode starts clean. The readings are the host's (``/proc``, ``statvfs``),
never the sandbox's word."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import gymnasium as gym
import pytest
from appworld_helpers import process_gone, task

from rubricgym.adapters.appworld.paths import appworld_python

pytestmark = pytest.mark.slow
CAP_GB, OUTPUTS_CAP_MB = 1.0, 64.0
MB = 1024**2
# routes around AppWorld's import check (it reads names, not values)
WRITER = ("io = __import__('i' + 'o')\nf = getattr(io, 'File' + 'IO')({path!r}, 'w')\n"
          "chunk = b'x' * (16 << 20)\nwritten = 0\n"
          "try:\n    while written < {size}:\n        f.write(chunk)\n        written += len(chunk)\n"
          "except OSError as e:\n    print('refused after', written, e)\nf.close()\nprint('wrote', written)\n")


def spawn(code: str, count: int, wait: bool) -> str:
    """Agent code that starts ``count`` Python processes running ``code`` (and waits for them)."""
    python = str(appworld_python())
    return ("os = __import__('o' + 's')\n"
            f"pids = [os.posix_spawn({python!r}, [{python!r}, '-c', {code!r}], {{}}) for _ in range({count})]\n"
            + ("for p in pids:\n    os.waitpid(p, 0)\n" if wait else "print('started', len(pids))\n"))


def running_with(marker: str, within_s: float = 5.0) -> bool:
    """Whether a process whose command line holds ``marker`` still runs after ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        found = False
        for proc in Path("/proc").iterdir():
            try:
                found = found or marker.encode() in (proc / "cmdline").read_bytes()
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.fixture(scope="module")
def env():
    env = gym.make("AppWorld-Rubric-v0", reward="none", split="offline_all", memory_cap_gb=CAP_GB,
                   outputs_cap_mb=OUTPUTS_CAP_MB, step_cpu_s=30.0)
    yield env
    env.close()


def _reset(env, scenario: str = "answertopsender"):
    env.reset(options={"task_id": task(scenario)["id"]})
    return env.unwrapped.adapter


def _contained(env, code: str, limit: str | None, exception_type: str, message: str) -> None:
    """The step is a policy failure with these facts, its sandbox gone; the next episode is healthy."""
    adapter = env.unwrapped.adapter
    pid = adapter.server.pid
    obs, reward, terminated, truncated, info = env.step(f"<action>{code}</action>")
    assert terminated and not truncated and reward == 0.0 and "environment_failure" not in info, obs
    assert message in info["policy_failure"], info["policy_failure"]
    facts = info["transition"].facts
    assert facts.broke_engine and facts.execution_failed and not facts.accepted
    assert facts.resource_limit == limit and facts.exception_type == exception_type
    assert info["outcome"].success is False
    assert process_gone(pid, within_s=5.0)  # the sandbox, its processes and its /tmp with it
    _reset(env)
    census = adapter.server.census()
    assert adapter.server.pid != pid and census.extra_pids(adapter.server.own_pids) == []
    assert census.tmp_bytes < MB and census.outputs_bytes < MB  # a fresh sandbox, nothing carried over
    _, _, terminated, truncated, info = env.step("<action>print(apis.supervisor.show_profile()['email'])</action>")
    assert not terminated and not truncated and info["transition"].facts.accepted


def test_a_tmp_filled_past_the_cap_is_a_memory_failure_and_the_tmpfs_is_sized(env):
    adapter = _reset(env)
    size = os.statvfs(f"/proc/{adapter.server.server_pid}/root/tmp")
    assert size.f_blocks * size.f_frsize == CAP_GB * 1024**3  # the kernel refuses writes past the cap
    _contained(env, WRITER.format(path="/tmp/fill", size=int(1.2 * 1024**3)), "memory", "SandboxMemoryLimit",
               "past its memory cap of 1 GB")


def test_tmp_is_emptied_between_episodes(env):
    adapter = _reset(env)
    pid = adapter.server.pid
    obs, _, terminated, _, info = env.step("<action>" + WRITER.format(path="/tmp/kept", size=320 * MB)
                                           + "</action>")
    assert not terminated and f"wrote {320 * MB}" in obs, obs  # under the cap: the step is fine
    assert adapter.server.census().tmp_bytes >= 320 * MB  # held in the sandbox's memory, not in any process
    _reset(env)  # the issue: it survived reset() and was freed only at close()
    assert adapter.server.pid == pid and adapter.server.census().tmp_bytes < MB
    obs, *_ = env.step("<action>os = __import__('o' + 's')\nprint(getattr(os, 'path').exists('/tmp/kept'))</action>")
    assert obs.strip().endswith("False"), obs


def test_child_processes_past_the_cap_together_are_a_memory_failure(env):
    _reset(env)
    hog = "import time\nx = b'1' * (600 << 20)\ntime.sleep(120)"  # each under the per-process cap of 1 GB
    _contained(env, spawn(hog, 3, wait=True), "memory", "SandboxMemoryLimit", "past its memory cap of 1 GB")


def test_an_outputs_folder_past_its_quota_is_a_disk_failure(env):
    adapter = _reset(env)
    target = adapter.outputs / "fill.bin"
    _contained(env, WRITER.format(path=str(target), size=200 * MB), "disk", "OutputsQuota",
               f"past its quota of {OUTPUTS_CAP_MB:g} MB")
    assert not target.exists()


def test_work_left_running_is_charged_to_the_step_and_episode_that_started_it(env):
    """The issue: a busy child started by the step that completes the task kept that step's
    reward, burned CPU through reset() and was blamed on the next episode's second step."""
    chosen = task("answertopsender")
    adapter = _reset(env)
    for cell in chosen["good"][:-1]:
        _, _, terminated, _, info = env.step(f"<action>{cell}</action>")
        assert not terminated and "policy_failure" not in info
    pid = adapter.server.pid
    marker = f"leftover-{uuid.uuid4().hex}"
    busy = spawn(f"# {marker}\nwhile True:\n    pass", 1, wait=False)
    obs, reward, terminated, truncated, info = env.step(f"<action>{chosen['good'][-1]}\n{busy}</action>")
    assert terminated and not truncated and reward == 0.0, obs  # the completing step loses its reward
    assert "left work running" in info["policy_failure"] and info["outcome"].success is False
    facts = info["transition"].facts
    assert facts.broke_engine and facts.exception_type == "LeftWorkRunning"
    assert info["transition"].step == len(chosen["good"]) - 1  # the step that started it
    assert process_gone(pid, within_s=5.0)
    assert not running_with(marker)  # the busy child is gone before the next episode starts
    _reset(env)
    for cell in chosen["good"]:  # the next episode: nothing charged to it
        _, reward, terminated, _, info = env.step(f"<action>{cell}</action>")
        assert "policy_failure" not in info
    assert terminated and reward == 1.0


def test_a_child_left_sleeping_is_left_work_too(env):
    _reset(env)
    _contained(env, spawn("import time\ntime.sleep(120)", 2, wait=False), None, "LeftWorkRunning",
               "left work running")


def test_memory_no_census_could_see_is_refused(env):
    """Memory held by a memfd, a System V segment or a file in ``/dev/shm`` is in no process's
    resident set and not in ``/tmp``: each route is refused (seccomp, a read-only ``/dev``), and
    proven able to fail the test (a device file is still written; ``ctypes`` itself works)."""
    _reset(env)
    code = ("os = __import__('o' + 's')\nio = __import__('i' + 'o')\nct = __import__('ctyp' + 'es')\n"
            "def attempt(name, call):\n    try:\n        call()\n        print(name, 'allowed')\n"
            "    except OSError as e:\n        print(name, 'refused', e.errno)\n"
            "attempt('memfd', lambda: getattr(os, 'memfd_' + 'create')('held'))\n"
            "libc = getattr(ct, 'CDLL')(None, use_errno=True)\n"
            "print('shmget', getattr(libc, 'shmget')(0, 64 << 20, 0o1600), getattr(ct, 'get_errno')())\n"
            "print('getpid', getattr(libc, 'getpid')() > 0)\n"
            "attempt('devshm', lambda: getattr(io, 'File' + 'IO')('/dev/shm/held', 'w').write(b'x' * 4096))\n"
            "attempt('devnull', lambda: getattr(io, 'File' + 'IO')('/dev/null', 'w').write(b'x'))\n")
    obs, _, terminated, _, info = env.step(f"<action>{code}</action>")
    assert not terminated and "policy_failure" not in info, obs
    lines = dict(line.split(" ", 1) for line in obs.strip().splitlines()[-5:])
    assert lines == {"memfd": "refused 1", "shmget": "-1 1", "getpid": "True", "devshm": "refused 30",
                     "devnull": "allowed"}, obs
