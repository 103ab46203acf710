"""A served env is an env id with kwargs, so what takes env ids takes it: TRL's
``environment_factory`` class (``rubricgym_environment``) plays a served ALFWorld episode
exactly as it plays the in-process env."""

from __future__ import annotations

import pytest
from requirements_guard import need

import rubricgym  # noqa: F401  (registers the env ids)

pytestmark = pytest.mark.slow  # starts a server and its ALFWorld session worker

TASK = "look_at_obj_in_light-Pen-None-FloorLamp-330/trial_T00000013_train_00"


def _play(cls, plan: list[str]) -> tuple[list[str], list[dict], float]:
    env = cls()
    texts = [env.reset(seed=0, task_id=TASK)]
    texts += [env.act(command) for command in plan]
    records, reward = env.step_records, env.get_reward()
    env._close()
    return texts, records, reward


def test_trl_environment_factory_plays_a_served_env_like_the_local_one(serve):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    import gymnasium as gym

    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
    from rubricgym.integrations.trl_tools import rubricgym_environment

    kwargs = {"data_path": str(BUNDLED_ROOT)}
    server = serve("ALFWorld-Rubric-v0", "--max-sessions", "2", "--workers", "1", kwargs=kwargs)
    probe = gym.make("ALFWorld-Rubric-v0", reward="none", **kwargs)
    probe.reset(seed=0, options={"task_id": TASK})
    plan = probe.unwrapped.adapter.expert_plan()
    probe.close()

    here = _play(rubricgym_environment("ALFWorld-Rubric-v0", **kwargs), plan)
    # env_id= is optional (the handshake checks it); here it would clash with the function's own env_id
    there = _play(rubricgym_environment("rubricgym/Remote-v0", url=server.url), plan)
    assert there == here  # prompts (benchmark, grammar, admissible actions), rewards and rubric records
    assert there[1][-1]["terminated"] and "trca" in there[1][-1]["rubric"]
