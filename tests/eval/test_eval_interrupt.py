"""``rubricgym eval`` stopped by SIGINT (the whole process group, as Ctrl-C) and by SIGKILL
while episodes are in flight, then ``--resume``: no finished episode is redone, none is lost
or half-written, and the final summary is an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rubricgym.cli import main
from rubricgym.trainers.run_files import append_run_line, drop_partial_line

ROOT = Path(__file__).resolve().parents[2]
ENV = "SearchQA-Rubric-v0"
ARGS = ["--env", ENV, "--n", "4", "--policy", "callable", "--callable", "eval_agents:slow_expert", "--concurrency", "2"]


def lines(out: Path) -> list[str]:
    path = out / "episodes.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted(out: Path, sig: int) -> tuple[int, list[str]]:
    """Start the eval in its own process group; once one episode is written (two are then in
    flight on the two workers), send ``sig`` to the group. The eval starts with SIGINT at its
    default, as a terminal's foreground job does: a test run launched in the background of a
    script inherits SIGINT ignored, and a Python started so never raises KeyboardInterrupt."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "eval"), str(ROOT / "tests")])}
    proc = subprocess.Popen([sys.executable, "-m", "rubricgym.cli", "eval", *ARGS, "--out", str(out)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 240
        while not lines(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, lines(out)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigint_and_sigkill_then_resume_equal_an_uninterrupted_run(tmp_path):
    reference = tmp_path / "whole"
    assert main(["eval", *ARGS, "--out", str(reference)]) == 0
    expected = json.loads((reference / "summary.json").read_text())
    whole = sorted(json.loads(x)["task_id"] for x in lines(reference))
    for sig, code in ((signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)):
        out = tmp_path / signal.Signals(sig).name
        returncode, before = interrupted(out, sig)
        assert returncode == code
        assert 1 <= len(before) < 4 and all(json.loads(x)["outcome"] == "success" for x in before)
        assert main(["eval", *ARGS, "--out", str(out), "--resume"]) == 0
        after = lines(out)
        assert after[: len(before)] == before  # nothing finished was redone or rewritten
        assert sorted(json.loads(x)["task_id"] for x in after) == whole  # nothing lost, nothing twice
        assert json.loads((out / "summary.json").read_text()) == expected


def test_a_line_cut_by_a_kill_is_dropped_and_its_episode_replayed(tmp_path):
    path = tmp_path / "episodes.jsonl"
    append_run_line(path, json.dumps({"task_id": "a", "sample": 0}))
    with open(path, "a") as fh:
        fh.write('{"task_id": "b", "sam')  # what a kill mid-append would leave
    assert drop_partial_line(path) and path.read_text() == '{"task_id": "a", "sample": 0}\n'
    assert not drop_partial_line(path)  # whole lines are left alone
