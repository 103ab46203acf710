"""Server lifecycle: one sandboxed server per env (on its own Unix socket), none left behind,
nor anything its agent code started (close, exit, parent killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import pytest
from appworld_helpers import process_gone, task

pytestmark = pytest.mark.slow




def test_two_envs_get_two_sandboxed_servers_and_close_stops_them():
    a = gym.make("AppWorld-Rubric-v0", reward="none")
    b = gym.make("AppWorld-Rubric-v0", reward="none")
    try:
        ta, tb = task("textbyname"), task("todocount")
        a.reset(options={"task_id": ta["id"]})
        b.reset(options={"task_id": tb["id"]})
        sa, sb = a.unwrapped.adapter.server, b.unwrapped.adapter.server
        assert sa.pid != sb.pid and sa.socket != sb.socket and sa.socket.is_socket() and sb.socket.is_socket()
        sockets = (sa.socket.parent, sb.socket.parent)
        # parallel worlds do not interfere
        obs_a = a.step("<action>print(apis.supervisor.show_active_task()['instruction'])</action>")[0]
        obs_b = b.step("<action>print(apis.supervisor.show_active_task()['instruction'])</action>")[0]
        assert ta["instruction"] in obs_a and tb["instruction"] in obs_b
        pids = (sa.pid, sb.pid)
        outputs = a.unwrapped.adapter.data_root / "experiments" / "outputs" / a.unwrapped.adapter.experiment_name
        assert outputs.exists()
    finally:
        a.close()
        b.close()
    assert all(process_gone(pid, within_s=1.0) for pid in pids)  # close waited on the PIDs
    assert not outputs.exists() and not any(folder.exists() for folder in sockets)
    a.close()  # safe twice


SCRIPT = textwrap.dedent("""
    import os, sys, threading, time, gymnasium as gym, rubricgym
    env = gym.make("AppWorld-Rubric-v0", reward="none")
    env.reset(options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    # agent code starts two processes that would outlive a plain server, spawned and forked, and
    # waits on them (a step that returned with them running would be killed as leaving work running)
    spawn = ("os = __import__('o' + 's')\\n"  # posix.fork: AppWorld null-patches os.fork
             f"pid = getattr(os, 'posix_' + 'spawn')('/usr/bin/sleep', ['sleep', '{sys.argv[2]}'], {{}})\\n"
             "if getattr(__import__('pos' + 'ix'), 'fo' + 'rk')() == 0:\\n"
             f"    getattr(os, 'exe' + 'cv')('/usr/bin/sleep', ['sleep', '{sys.argv[2]}1'])\\n"
             "getattr(os, 'wait' + 'pid')(pid, 0)")
    print(env.unwrapped.adapter.server.pid, flush=True)
    threading.Thread(target=env.step, args=(f"<action>{spawn}</action>",), daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = 0
        for name in os.listdir("/proc"):
            try:
                running += (name.isdigit() and int(name) != os.getpid()
                            and open(f"/proc/{name}/cmdline", "rb").read().startswith(b"sleep\\0" + sys.argv[2].encode()))
            except OSError:
                pass
        if running >= 2:
            break
        time.sleep(0.1)
    print("started", running, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
    # "exit": the interpreter exits with the step still running; atexit stops the server
""")


def processes_with(marker: str) -> list[int]:
    """Host PIDs whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_no_orphan_server_when_the_owner_exits_or_dies(how):
    """Neither the server nor what agent code started in its sandbox outlives the owner."""
    marker = f"{4000 + os.getpid() % 1000}.{int(time.time() * 1000) % 100000}"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, "hang" if how == "killed" else "exit", marker],
                            stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        pid = int(proc.stdout.readline())
        step_output = proc.stdout.readline()
        assert step_output.split() == ["started", "2"], step_output  # both started, the step still running
        if how == "killed":
            assert not process_gone(pid, within_s=0.5)
            assert len(processes_with(marker)) == 3, step_output  # this test's owner and both sleeps
            proc.send_signal(signal.SIGKILL)  # no atexit: the parent-death signal must reap it
        proc.wait(timeout=60)
        assert process_gone(pid), f"AppWorld server {pid} outlived its owner ({how})"
        assert all(process_gone(p, within_s=10.0) for p in processes_with(marker)), "agent processes outlived it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
