"""The expert player (``spec.expert``) solves offline tasks through ``gym.make``."""

from __future__ import annotations

import gymnasium as gym
import pytest
from appworld_helpers import TASKS, accepted_ids

import rubricgym

pytestmark = pytest.mark.slow


def test_expert_solves_a_train_and_a_dev_task():
    expert = rubricgym.get_spec("AppWorld-Rubric-v0").load_expert()
    chosen = [next(t["id"] for t in TASKS if t["split"] == split and t["id"] in accepted_ids())
              for split in ("train", "dev")]
    env = gym.make("AppWorld-Rubric-v0", reward="none", split="offline_all")
    try:
        adapter = env.unwrapped.adapter
        with pytest.raises(RuntimeError, match="reset"):
            expert(adapter)
        for task_id in chosen:
            env.reset(options={"task_id": task_id})
            plan = expert(adapter)
            assert plan and all(isinstance(action, str) for action in plan)
            for action in plan:
                _, reward, terminated, truncated, info = env.step(adapter.grammar.render(action))
                if terminated or truncated:
                    break
            assert terminated and reward == 1.0 and info["outcome"].success, task_id
    finally:
        env.close()
