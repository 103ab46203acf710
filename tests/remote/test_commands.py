"""A served env is an env id with kwargs, so what takes env ids takes it: TRL's
``environment_factory`` class (``rubricgym_environment``) plays a served ALFWorld episode
exactly as it plays the in-process env."""

from __future__ import annotations

import pytest
from remote.conftest import SERVED_ALFWORLD, SERVED_ALFWORLD_MAX_STEPS
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


@SERVED_ALFWORLD
def test_trl_environment_factory_plays_a_served_env_like_the_local_one(alfworld_server):
    import gymnasium as gym

    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
    from rubricgym.integrations.trl_tools import rubricgym_environment

    # the shared server's options: the bundled games, a budget of 6 steps (the plan takes 3)
    kwargs = {"data_path": str(BUNDLED_ROOT), "max_steps": SERVED_ALFWORLD_MAX_STEPS}
    server = alfworld_server
    probe = gym.make("ALFWorld-Rubric-v0", reward="none", **kwargs)
    probe.reset(seed=0, options={"task_id": TASK})
    plan = probe.unwrapped.adapter.expert_plan()
    probe.close()

    here = _play(rubricgym_environment("ALFWorld-Rubric-v0", **kwargs), plan)
    # env_id= is optional (the handshake checks it); here it would clash with the function's own env_id
    there = _play(rubricgym_environment("rubricgym/Remote-v0", url=server.url), plan)
    assert there == here  # prompts (benchmark, grammar, admissible actions), rewards and rubric records
    assert there[1][-1]["terminated"] and "trca" in there[1][-1]["rubric"]


@SERVED_ALFWORLD
def test_rubricgym_eval_measures_a_served_env(alfworld_server, tmp_path):
    """``rubricgym eval --env rubricgym/Remote-v0 --env-kwargs {url}``: the task ids come from the
    server, the episodes are played there, and the per-step rubric records come back."""
    import json

    from rubricgym.cli import main

    server = alfworld_server  # the bundled games (the first task's expert plan fits its 6 steps)
    out = tmp_path / "eval"
    assert main(["eval", "--env", "rubricgym/Remote-v0", "--env-kwargs", json.dumps({"url": server.url}), "--n", "1",
                 "--policy", "callable", "--callable", "remote.remote_agents:alfworld_expert", "--out", str(out)]) == 0
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["env_id"] == "rubricgym/Remote-v0" and record["outcome"] == "success"
    assert record["env_return"] == 1.0 and all("trca" in s["rubric"] for s in record["step_records"])
    assert main(["eval", "--env", "rubricgym/Remote-v0", "--env-kwargs", "[1]", "--tasks", "t", "--policy",
                 "callable", "--callable", "remote.remote_agents:alfworld_expert", "--out", str(tmp_path / "x")]) == 2


def test_the_trainer_trains_on_a_served_env(serve, tmp_path):
    """``env.url``: the trainer's rollouts play on the server (task ids from it, no warm start:
    the expert's engine is there), and the iteration trains on their per-step rubric records."""
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    import json

    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    server = serve("ALFWorld-Rubric-v0", "--max-sessions", "3", "--workers", "1", "--max-steps", "2",
                   kwargs={"data_path": str(BUNDLED_ROOT)})
    config = load_config(None, [
        "model.name=tiny", "env.id=ALFWorld-Rubric-v0", f"env.url={server.url}", "env.max_steps=2",
        "algorithm.advantage=trca", "algorithm.group_size=2", "algorithm.tasks_per_iteration=1",
        "generation.max_new_tokens=8", "run.iterations=1", "run.progress=false", "run.evaluate_after=false",
        "run.tensorboard=false", f"run.output_dir={tmp_path}", "run.name=served"])
    trainer = Trainer(config)
    try:
        assert not trainer.warmup_wanted() and len(trainer.tasks) > 1  # the server's task ids
        metrics = trainer.train_iteration()
    finally:
        trainer.close()
    assert metrics["rollout_errors"] == 0 and metrics["episode_steps"] == 2.0 and "trca_reward_mean" in metrics
    (line, *_) = (tmp_path / "served" / "trajectories" / "iter-000001.jsonl").read_text().splitlines()
    assert json.loads(line)["benchmark"] == "ALFWorld"  # the served env's trajectory, as saved in-process
    with pytest.raises(ValueError, match="env.url plays a served env"):
        load_config(None, [f"env.url={server.url}", "env.kwargs={data_path: x}"])
