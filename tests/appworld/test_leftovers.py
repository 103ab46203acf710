"""Issue 28, item 9: what a killed process leaves (AppWorld's server log in the temp folder,
its experiment outputs under the data root) is removed by the next start, and only what
belongs to dead owners."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import pytest

from rubricgym.adapters.appworld.paths import offline_data_root
from rubricgym.servers import ServerProcess, owner_pid, sweep_stale

PLAY_THEN_WAIT = """
import sys, time, gymnasium as gym, rubricgym
env = gym.make("AppWorld-Rubric-v0")
env.reset(seed=0)
env.step("<action>print(1 + 1)</action>")
print(env.unwrapped.adapter.experiment_name, flush=True)
time.sleep(600)
"""


def finished_pid() -> int:
    """The PID of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_owner_pid_reads_only_the_digits_after_the_prefix():
    assert owner_pid("appworld-server-1234-abcd.log", "appworld-server-") == 1234
    assert owner_pid("rubricgym_77_beef", "rubricgym_") == 77
    assert owner_pid("rubricgym_setup_77", "rubricgym_") is None
    assert owner_pid("other-1234.log", "appworld-server-") is None


def test_a_server_start_sweeps_logs_of_dead_owners_only(tmp_path):
    prefix = f"rubricgym-test-{os.getpid()}x-"
    temp = Path(tempfile.gettempdir())
    stale = temp / f"{prefix}{finished_pid()}-old.log"
    alive = temp / f"{prefix}1-init.log"  # PID 1 is alive
    stale.write_text("left by a killed run")
    alive.write_text("someone else's, running")
    server = ServerProcess([sys.executable, "-c", "import time; time.sleep(30)"], log_prefix=prefix)
    try:
        server.start()
        assert not stale.exists() and alive.exists()
        own = list(temp.glob(f"{prefix}{os.getpid()}-*.log"))
        assert len(own) == 1
    finally:
        server.stop(grace_s=2)
        alive.unlink()
    assert not own[0].exists()  # removed at stop
    assert sweep_stale(tmp_path / "missing", prefix) == []


@pytest.mark.slow
def test_a_killed_appworld_process_leaves_nothing_after_the_next_start():
    proc = subprocess.Popen([sys.executable, "-c", PLAY_THEN_WAIT], stdout=subprocess.PIPE, text=True)
    try:
        experiment = proc.stdout.readline().strip()
        assert experiment.startswith(f"rubricgym_{proc.pid}_"), experiment
        outputs = offline_data_root() / "experiments" / "outputs"
        logs = list(Path(tempfile.gettempdir()).glob(f"appworld-server-{proc.pid}-*.log"))
        assert (outputs / experiment).is_dir() and len(logs) == 1  # what a kill leaves behind
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    env = gym.make("AppWorld-Rubric-v0")  # the next start sweeps the dead owner's outputs
    try:
        env.reset(seed=0)  # starts the server: sweeps the dead owner's log
        assert not (outputs / experiment).exists()
        assert not logs[0].exists()
    finally:
        env.close()
