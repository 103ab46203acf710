"""The main training entry point runs on WebShop: one iteration with the tiny random model
from configs/webshop_smollm2_cpu.yaml (TRCA advantages from the WebShop operator library)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "webshop_smollm2_cpu.yaml"
SMALL = [
    "model.name=tiny", "env.max_steps=2", "algorithm.group_size=2", "algorithm.tasks_per_iteration=1",
    "algorithm.micro_batch_size=4", "algorithm.skip_zero_advantage=false", "generation.max_new_tokens=12",
    "prompt.max_prompt_tokens=96", "warmup.enabled=false", "run.iterations=1", "run.progress=false",
    "run.tensorboard=false", "run.evaluate_after=false",
]


@pytest.mark.slow
def test_one_trainer_iteration_on_webshop(tmp_path):
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    config = load_config(CONFIG, SMALL + [f"run.output_dir={tmp_path}"])
    assert config.env.id == "WebShop-Rubric-v0" and config.algorithm.advantage == "trca"
    trainer = Trainer(config, tmp_path / "run")
    try:
        trainer.train()
        metrics = trainer.read_metrics()
    finally:
        trainer.close()
    assert [m["iteration"] for m in metrics] == [1]
    m = metrics[0]
    assert m["rollout_errors"] == 0 and m["episode_steps"] == 2
    # a random tiny model writes no action tags: the WebShop library's parse_failure prices each step
    assert m["action_parsed_rate"] < 1.0 and m["trca_reward_mean"] < 0
    saved = list((tmp_path / "run").rglob("*.jsonl"))
    lines = [json.loads(line) for p in saved for line in p.read_text().splitlines() if line.strip()]
    trajectories = [x for x in lines if x.get("benchmark") == "WebShop"]
    assert trajectories and all(t["transitions"] for t in trajectories)


@pytest.mark.slow
def test_expert_demonstrations_for_the_warm_start():
    """The trainer's warm start replays the spec's expert (the oracle) on WebShop tasks."""
    import gymnasium as gym

    from rubricgym.models import build_tiny_model
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.warmup import collect_demonstrations

    config = load_config(CONFIG, ["model.name=tiny"])
    _, tokenizer = build_tiny_model(seed=0)

    def make():
        return gym.make(config.env.id, max_steps=config.env.max_steps)

    demos = collect_demonstrations(make, tokenizer, config.prompt, ["train-coffee-0-0", "train-socks-1-1"], seed=0)
    per_task = {t: sum(d.task_id == t for d in demos) for t in ("train-coffee-0-0", "train-socks-1-1")}
    assert min(per_task.values()) >= 7  # search, open, features, back, two options, buy
    assert all("click[" in d.response_text or "search[" in d.response_text for d in demos)
