"""A study's worker processes stop with the study (trainers/study/pool.py): a worker still
training when the study process is killed must not keep writing into the study's folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rubricgym.trainers.study.pool import study_pool

STUDY = """
import os, sys, time
from rubricgym.trainers.study.pool import study_pool

if __name__ == "__main__":
    pool = study_pool(1)
    worker = pool.submit(os.getpid).result()
    busy = pool.submit(time.sleep, 300)  # a run still training
    with open(sys.argv[1], "w") as f:
        f.write(str(worker))
    busy.result()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its new parent) is gone as far as the study is concerned
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_busy_worker_exits_when_the_study_process_is_killed(tmp_path, how):
    script, pid_file = tmp_path / "study.py", tmp_path / "worker.pid"
    script.write_text(STUDY)
    study = subprocess.Popen([sys.executable, str(script), str(pid_file)])
    try:
        for _ in range(600):  # the worker starts (spawn: a fresh interpreter)
            if pid_file.is_file() and pid_file.read_text():
                break
            time.sleep(0.1)
        worker = int(pid_file.read_text())
        assert _alive(worker)
        study.send_signal(how)
        study.wait(timeout=60)
        # without the parent-death signal the worker sleeps on for 300 s (its task)
        for _ in range(600):
            if not _alive(worker):
                break
            time.sleep(0.1)
        assert not _alive(worker), "the worker outlived the study"
    finally:
        study.kill()
        if pid_file.is_file() and pid_file.read_text():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_initializer_still_runs_in_each_worker(tmp_path):
    with study_pool(1, os.chdir, (str(tmp_path),)) as pool:
        assert pool.submit(os.getcwd).result() == str(tmp_path)
