"""Checkpoint and exact resume: a run stopped (or killed) after a checkpoint and resumed
produces the same next-iteration metrics as the uninterrupted run (CPU, fixed seed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rubricgym.trainers.checkpoint import CheckpointError, list_checkpoints
from rubricgym.trainers.config import load_config
from rubricgym.trainers.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
WORD_CLI = ROOT / "tests" / "trainer" / "word_cli.py"  # the CLI with env.factory=word registered
SETTINGS = [
    "model.name=tiny", "env.factory=word", "env.max_steps=2",
    "algorithm.advantage=grpo", "algorithm.group_size=3", "algorithm.tasks_per_iteration=2",
    "algorithm.epochs=2", "algorithm.minibatches=2", "algorithm.lr=0.01", "algorithm.lr_schedule=cosine",
    "algorithm.micro_batch_size=4", "algorithm.entropy_coef=0.05",
    # a random tiny model never wins, so advantages are 0: train on KL + entropy anyway so
    # the weights, the optimizer and the scheduler all move between iterations
    "algorithm.skip_zero_advantage=false", "generation.max_new_tokens=12", "prompt.max_prompt_tokens=40",
    "run.iterations=3", "run.progress=false", "run.evaluate_after=false", "run.keep_checkpoints=5",
]
VOLATILE = ("time/", "throughput/", "memory/")


def _stable(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.startswith(VOLATILE)}


def _run(path: Path, stop_after: int | None = None) -> Trainer:
    trainer = Trainer(load_config(None, SETTINGS), path)
    trainer.train(stop_after=stop_after)
    trainer.close()
    return trainer


def test_resume_continues_exactly(tmp_path):
    full = _run(tmp_path / "full").read_metrics()
    assert [m["iteration"] for m in full] == [1, 2, 3]
    assert all(m["trained_samples"] > 0 for m in full) and full[2]["kl"] > 0  # the update really ran

    stopped = _run(tmp_path / "part", stop_after=2)
    assert [m["iteration"] for m in stopped.read_metrics()] == [1, 2]
    assert [p.name for p in list_checkpoints(tmp_path / "part")] == ["checkpoint-000001", "checkpoint-000002"]
    resumed = Trainer.from_run_dir(tmp_path / "part")
    assert resumed.iteration == 2 and resumed.data_position == 4
    resumed.train()
    resumed.close()
    again = resumed.read_metrics()
    assert [m["iteration"] for m in again] == [1, 2, 3]
    assert _stable(again[2]) == _stable(full[2])


def test_resume_takes_the_learning_rate_of_its_config(tmp_path):
    """The checkpoint's optimizer holds the old run's learning rate; an override on resume (how
    a run is forked from a warm start) must be the one that trains, on the same schedule."""
    constant = [*SETTINGS, "algorithm.lr_schedule=constant"]
    Trainer(load_config(None, constant), tmp_path / "run").train(stop_after=1)
    resumed = Trainer.from_run_dir(tmp_path / "run", ["algorithm.lr=0.003", "algorithm.weight_decay=0.1"])
    groups = resumed.optimizer.param_groups
    assert [(g["lr"], g["initial_lr"], g["weight_decay"]) for g in groups] == [(0.003, 0.003, 0.1)] * len(groups)
    assert resumed.optimizer.state  # the moments are the checkpoint's, not reset
    resumed.train(stop_after=1)
    resumed.close()
    assert [m["lr"] for m in resumed.read_metrics()] == [0.01, 0.003]


def test_resume_from_an_earlier_checkpoint_discards_later_metrics(tmp_path):
    trainer = _run(tmp_path / "run")
    full = trainer.read_metrics()
    # a crash between writing iteration 3's metrics and its checkpoint
    for ckpt in list_checkpoints(tmp_path / "run")[2:]:
        import shutil

        shutil.rmtree(ckpt)
    resumed = Trainer.from_run_dir(tmp_path / "run")
    assert [m["iteration"] for m in resumed.read_metrics()] == [1, 2]
    resumed.train()
    resumed.close()
    assert _stable(resumed.read_metrics()[2]) == _stable(full[2])


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    trainer = Trainer(load_config(None, SETTINGS), tmp_path / "empty")
    trainer.close()
    with pytest.raises(CheckpointError, match="no checkpoint to resume from"):
        Trainer.from_run_dir(tmp_path / "empty")


@pytest.mark.slow
def test_killed_process_resumes_through_the_cli(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    args = [sys.executable, str(WORD_CLI), "train", "--quiet"] + [a for s in SETTINGS for a in ("--set", s)]
    subprocess.run(args + ["--set", "run.name=full", "--output-dir", str(tmp_path)], check=True, env=env,
                   cwd=ROOT, timeout=900, capture_output=True)
    full = [json.loads(x) for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]

    proc = subprocess.Popen(args + ["--set", "run.name=killed", "--output-dir", str(tmp_path)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = tmp_path / "killed"
    deadline = time.time() + 600
    while not list_checkpoints(run_dir) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list_checkpoints(run_dir), "no checkpoint was written before the kill"
    out = subprocess.run([sys.executable, str(WORD_CLI), "train", "--resume", str(run_dir), "--quiet"],
                         env=env, cwd=ROOT, timeout=900, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    again = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in again] == [1, 2, 3]
    assert [_stable(m) for m in again] == [_stable(m) for m in full]
