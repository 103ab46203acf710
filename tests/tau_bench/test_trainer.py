"""configs/tau_bench_retail_cpu.yaml trains: one iteration with the tiny random model on tau2's
retail tasks with the scripted user, TRCA rewards in every stored transition."""

from __future__ import annotations

from pathlib import Path

import pytest
from requirements_guard import need

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_iteration_of_the_tau_bench_config_with_the_tiny_model(tmp_path):
    need("torch", "pip install 'rubricgym[train]'")
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    from rubricgym.contract import load_jsonl
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    config = load_config(ROOT / "configs" / "tau_bench_retail_cpu.yaml", [
        "model.name=tiny", "env.max_steps=2", "algorithm.group_size=2", "algorithm.tasks_per_iteration=1",
        "algorithm.skip_zero_advantage=false", "generation.max_new_tokens=16", "prompt.max_prompt_tokens=64",
        "warmup.enabled=false", "run.iterations=1", "run.progress=false", "run.tensorboard=false",
        "run.evaluate_after=false", f"run.output_dir={tmp_path}", "run.name=tau",
    ])
    assert config.env.id == "TauBench-Retail-Rubric-v0" and config.env.kwargs["user"] == "scripted"
    trainer = Trainer(config)
    trainer.train()
    trainer.close()
    metrics = trainer.read_metrics()
    assert len(metrics) == 1 and "trca_reward_mean" in metrics[0] and metrics[0]["episode_steps"] >= 1
    trajs = load_jsonl(tmp_path / "tau" / "trajectories" / "iter-000001.jsonl")
    assert len(trajs) == 2 and trajs[0].benchmark == "TauBench" and trajs[0].task_id == trajs[1].task_id
    assert trajs[0].initial_observation == trajs[1].initial_observation
    assert all("trca" in t.info for traj in trajs for t in traj.transitions)
    # a random model emits no parseable action: every step is a scored Invalidity event
    assert all(not t.facts.parsed or t.facts.call_kind for traj in trajs for t in traj.transitions)
