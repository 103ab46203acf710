"""In-process registration reaches ``rubricgym eval``'s worker processes: a benchmark (spec,
adapter, operator library) registered in code, as in a notebook, without packaging it, plays
in two spawned workers, which discover only installed plugins and get the spec from the
parent (by module path, re-registered there); ``train`` plays it through a registered env
factory in two spawned env workers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from notebook_bench import ENV_ID, NAME, SPEC, make_env

import rubricgym
from rubricgym.cli import main
from rubricgym.registration import registered_in_process
from rubricgym.trainers.eval import EPISODES_FILE, SUMMARY_FILE


def test_eval_with_two_workers_plays_a_benchmark_registered_in_process(tmp_path):
    rubricgym.register_benchmark(SPEC)  # the notebook's cell: no entry point, no package
    assert registered_in_process(ENV_ID)[0].name == NAME
    out = tmp_path / "eval"
    assert main(["eval", "--env", ENV_ID, "--n", "2", "--samples", "2", "--policy", "callable", "--callable",
                 "notebook_bench:count_up", "--concurrency", "2", "--workers", "2", "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / EPISODES_FILE).read_text().splitlines()]
    assert sorted((r["task_id"], r["sample"]) for r in records) == [("reach-1", 0), ("reach-1", 1),
                                                                      ("reach-2", 0), ("reach-2", 1)]
    assert all(r["outcome"] == "success" for r in records), [r["error"] for r in records]
    assert sorted(r["steps"] for r in records) == [1, 1, 2, 2]
    # the spec's operator library was attached in the workers (it names the in-process models)
    assert all(s["trca_reward"] is not None for r in records for s in r["step_records"])
    assert json.loads((out / SUMMARY_FILE).read_text())["success_rate"] == 1.0


def test_a_spec_a_worker_cannot_import_is_refused_with_the_fix():
    """Classes defined in an interactive session's ``__main__`` (a notebook cell) cannot be
    imported by a spawned process: refused before any worker starts, saying what to do."""
    code = (
        "from typing import ClassVar\n"
        "import rubricgym\n"
        "from rubricgym.registration import registered_in_process\n"
        "class CellFacts(rubricgym.Facts):\n"
        "    benchmark: ClassVar[str] = 'Cell'\n"
        "rubricgym.register_benchmark(rubricgym.BenchmarkSpec(name='Cell', facts_model=CellFacts,\n"
        "    binding_model=rubricgym.TaskBinding, binder='m:f', adapter='m:A',\n"
        "    env_ids=(rubricgym.EnvIdSpec('Cell-Rubric-v0'),)))\n"
        "assert registered_in_process('Other-v0') == ()\n"
        "try:\n"
        "    registered_in_process('Cell-Rubric-v0')\n"
        "except ValueError as exc:\n"
        "    print(exc)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "CellFacts is defined in __main__" in run.stdout and "mybench.py" in run.stdout, run.stdout


@pytest.mark.slow  # a tiny model's iteration; two spawned env workers import the env
def test_train_plays_it_through_a_registered_factory_in_spawned_env_workers(tmp_path):
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.env_workers import WorkerEnvSlots
    from rubricgym.trainers.trainer import Trainer

    rubricgym.register_env_factory("notebook-counter", make_env)  # the notebook's cell
    config = load_config(None, [
        "model.name=tiny", "model.device=cpu", "env.factory=notebook-counter", "env.max_steps=2",
        "env.workers=2", "env.worker_backend=process", "algorithm.advantage=grpo", "algorithm.group_size=2",
        "algorithm.tasks_per_iteration=2", "generation.max_new_tokens=8", "run.iterations=1", "run.progress=false",
        "run.evaluate_after=false", "run.tensorboard=false", "warmup.enabled=false",
        f"run.output_dir={tmp_path}", "run.name=nb"])
    trainer = Trainer(config)
    try:
        assert isinstance(trainer.collector.slots, WorkerEnvSlots)
        metrics = trainer.train_iteration()
    finally:
        trainer.close()
    assert metrics["rollout_errors"] == 0 and metrics["episode_steps"] >= 1, metrics
    lines = (tmp_path / "nb" / "trajectories" / "iter-000001.jsonl").read_text().splitlines()
    assert {json.loads(line)["task_id"] for line in lines} == {"reach-1", "reach-2"}  # both tasks played
