"""Server lifecycle: one loopback server per env, none left behind (close, exit, parent killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest
from appworld_helpers import process_gone, task

pytestmark = pytest.mark.slow




def test_two_envs_get_two_loopback_servers_and_close_stops_them():
    a = gym.make("AppWorld-Rubric-v0", reward="none")
    b = gym.make("AppWorld-Rubric-v0", reward="none")
    try:
        ta, tb = task("textbyname"), task("todocount")
        a.reset(options={"task_id": ta["id"]})
        b.reset(options={"task_id": tb["id"]})
        sa, sb = a.unwrapped.adapter.server, b.unwrapped.adapter.server
        assert sa.pid != sb.pid and sa.port != sb.port
        assert sa.url.startswith("http://127.0.0.1:") and sb.url.startswith("http://127.0.0.1:")
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
    assert not outputs.exists()
    a.close()  # safe twice


SCRIPT = textwrap.dedent("""
    import sys, time, gymnasium as gym, rubricgym
    env = gym.make("AppWorld-Rubric-v0", reward="none")
    env.reset(options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    print(env.unwrapped.adapter.server.pid, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
""")


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_no_orphan_server_when_the_owner_exits_or_dies(how):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, "hang" if how == "killed" else "exit"],
                            stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        pid = int(proc.stdout.readline())
        if how == "killed":
            assert not process_gone(pid, within_s=0.5)
            proc.send_signal(signal.SIGKILL)  # no atexit: the parent-death signal must reap it
        proc.wait(timeout=60)
        assert process_gone(pid), f"AppWorld server {pid} outlived its owner ({how})"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
