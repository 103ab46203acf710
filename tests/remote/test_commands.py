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


def test_rubricgym_eval_measures_a_served_env(serve, tmp_path):
    """``rubricgym eval --env rubricgym/Remote-v0 --env-kwargs {url}``: the task ids come from the
    server, the episodes are played there, and the per-step rubric records come back."""
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    import json

    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
    from rubricgym.cli import main

    server = serve("ALFWorld-Rubric-v0", "--max-sessions", "2", "--workers", "1",
                   kwargs={"data_path": str(BUNDLED_ROOT)})
    out = tmp_path / "eval"
    assert main(["eval", "--env", "rubricgym/Remote-v0", "--env-kwargs", json.dumps({"url": server.url}), "--n", "1",
                 "--policy", "callable", "--callable", "remote.remote_agents:alfworld_expert", "--out", str(out)]) == 0
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["env_id"] == "rubricgym/Remote-v0" and record["outcome"] == "success"
    assert record["env_return"] == 1.0 and all("trca" in s["rubric"] for s in record["step_records"])
    assert main(["eval", "--env", "rubricgym/Remote-v0", "--env-kwargs", "[1]", "--tasks", "t", "--policy",
                 "callable", "--callable", "remote.remote_agents:alfworld_expert", "--out", str(tmp_path / "x")]) == 2
