"""TRCAReward on the real ALFWorld engine: expert walkthroughs, fuzzed actions, reward specs."""

from __future__ import annotations

import collections

import gymnasium as gym
import numpy as np
import pytest

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.attach import attach_reward
from rubricgym.estimators import group_step_advantages
from rubricgym.credit.trca import trca_rewards
from rubricgym.registration import get_spec, operator_library
from rubricgym.rewards import RewardContext
from rubricgym.rewards import RubricReward
from rubricgym.trca import TRCAConfig, load_library


def act(cmd: str) -> str:
    return f"<action>{cmd}</action>"


@pytest.fixture(scope="module")
def env():
    e = gym.make("ALFWorld-Rubric-v0")
    yield e
    e.close()


def play_expert(env, task_id: str) -> list[dict]:
    env.reset(seed=0, options={"task_id": task_id})
    records = []
    for cmd in env.unwrapped.adapter.expert_plan():
        _, reward, term, trunc, info = env.step(act(cmd))
        records.append({"reward": reward, "trca": info["trca"], "env_reward": info["transition"].env_reward})
        if term or trunc:
            break
    return records


def task_of_type(env, prefix: str) -> str:
    return next(t for t in env.unwrapped.adapter.task_ids() if t.startswith(prefix))


def test_make_attaches_trca_by_default(env):
    assert isinstance(env.unwrapped, gym.Env)
    wrapper = env
    while not isinstance(wrapper, RubricReward):
        wrapper = wrapper.env
    assert wrapper.component("trca").library.name == "alfworld-default"


def test_expert_walkthrough_rewards_follow_the_formulas(env):
    task = task_of_type(env, "pick_cool_then_place_in_recep")
    records = play_expert(env, task)
    lib = load_library(operator_library("ALFWorld"))
    o = np.array([[r["trca"]["judgments"][i] for i in lib.ids] for r in records])
    b = lib.library.budgets
    want = trca_rewards(o, lib.categories, b.r_evi, b.r_inval, b.r_exec, lib.library.lam)
    got = np.array([r["trca"]["r_TRCA"] for r in records])
    assert got == pytest.approx(want.r_trca)
    assert [r["reward"] for r in records] == pytest.approx(want.r_trca + np.array([r["env_reward"] for r in records]))
    fired = {i for r in records for i, v in r["trca"]["judgments"].items() if v}
    assert {"picked_target", "transformed_target", "placed_target", "appliance_reached"} <= fired
    assert not fired & {"parse_failure", "inadmissible", "nothing_happens", "repeated_action"}
    assert records[-1]["env_reward"] == 1.0  # the expert wins
    assert sum(r["trca"]["r_B"] for r in records) <= b.r_evi + b.r_exec + 1e-9


def test_fuzzed_actions_fire_every_invalidity_operator(env):
    env.reset(seed=1, options={"task_id": env.unwrapped.adapter.task_ids()[0]})
    fired = collections.Counter()
    for response in ["no tags at all", "<action></action>", act("fly to the moon"), act("look"), act("look"),
                     act("inventory"), act("take unicorn 1 from sofa 1"), "<action>look</action><action>look</action>"]:
        _, reward, _, _, info = env.step(response)
        on = [i for i, v in info["trca"]["judgments"].items() if v]
        fired.update(on)
        assert reward <= 0.0, (response, on)
    assert set(fired) >= {"parse_failure", "inadmissible", "nothing_happens", "repeated_action", "no_state_change"}


def play_to_the_pickup(env) -> str:
    """A pick-and-place game played by its expert up to the target's pickup (checked rewarded);
    returns that take command."""
    env.reset(seed=0, options={"task_id": task_of_type(env, "pick_and_place_simple")})
    plan = env.unwrapped.adapter.expert_plan()
    take = next(i for i, c in enumerate(plan) if c.startswith("take "))
    for cmd in plan[: take + 1]:
        _, _, _, _, info = env.step(act(cmd))
    assert info["trca"]["judgments"]["picked_target"] == 1
    return plan[take]


def test_invalid_step_after_a_pickup_is_not_rewarded_again(env):
    """An unparsed response must not re-fire the previous step's Execution operator."""
    play_to_the_pickup(env)
    _, reward, _, _, info = env.step("garbage")
    assert info["trca"]["judgments"]["picked_target"] == 0
    assert info["trca"]["judgments"]["parse_failure"] == 1 and reward < 0


def test_a_take_and_put_back_loop_earns_less_than_nothing(env):
    """The warm-started policy's commonest failure: take the target, put it back where it was,
    take it again. Only the first take is progress; every step of the loop is penalised."""
    take = play_to_the_pickup(env)
    obj, recep = take[len("take "):].split(" from ")
    rewards = []
    for cmd in [f"move {obj} to {recep}", take, f"move {obj} to {recep}"]:
        _, reward, _, _, info = env.step(act(cmd))
        judged = info["trca"]["judgments"]
        assert info["transition"].facts.revisited and judged["repeated_action"] == 1, cmd
        assert judged["picked_target"] == 0 and judged["placed_target"] == 0, cmd
        rewards.append(reward)
    assert max(rewards) < 0


def test_reset_clears_coverage(env):
    task = task_of_type(env, "pick_and_place_simple")
    first = play_expert(env, task)
    second = play_expert(env, task)
    assert [r["trca"]["r_B"] for r in first] == [r["trca"]["r_B"] for r in second]
    assert first[0]["trca"]["coverage"] == second[0]["trca"]["coverage"]


def test_trajectories_feed_group_credit(env):
    """A group: two expert wins and two failing rollouts of the same task; one context group."""
    task = task_of_type(env, "pick_and_place_simple")
    group = []
    for seed, good in [(0, True), (1, False), (2, True), (3, False)]:
        env.reset(seed=seed, options={"task_id": task})
        plan = env.unwrapped.adapter.expert_plan()
        for cmd in plan if good else ["look", "inventory", "look"]:
            env.step(act(cmd))
        group.append(env.unwrapped.trajectory.model_copy(deep=True))
    adv = group_step_advantages("trca", group)
    assert [len(a) for a in adv] == [t.num_steps for t in group]
    assert adv[0].mean() > 0 > adv[1].mean()
    grpo = group_step_advantages("grpo", group)
    assert np.all(grpo[0] > 0) and np.all(grpo[1] < 0)


def test_reward_specs(env, tmp_path):
    base = gym.make("ALFWorld-Rubric-v0", reward="none")
    assert not isinstance(base.env.env, RubricReward)  # OrderEnforcing(PassiveEnvChecker(RubricEnv))
    raw = base.unwrapped
    context = get_spec("ALFWorld").reward_context()
    path_env = attach_reward(raw, str(operator_library("ALFWorld")), context)
    assert isinstance(path_env, RubricReward) and path_env.component("trca").library.name == "alfworld-default"
    cfg_env = attach_reward(raw, TRCAConfig(r_exec=2.0, lam=0.5, keep_env_reward=False), context)
    trca = cfg_env.component("trca")
    assert trca.budgets.r_exec == 2.0 and trca.lam == 0.5 and not cfg_env.keep_env_reward

    class Spec:  # any object with wrap(env, context) is a reward spec
        def wrap(self, e, context):
            return gym.wrappers.TransformReward(e, lambda r: r * 2)

    assert isinstance(attach_reward(raw, Spec(), context), gym.wrappers.TransformReward)
    with pytest.raises(LookupError, match="NoSuchBenchmark"):
        attach_reward(raw, "default", RewardContext(benchmark="NoSuchBenchmark"))
    with pytest.raises(TypeError):
        attach_reward(raw, 42, context)
    with pytest.raises(FileNotFoundError):
        attach_reward(raw, str(tmp_path / "nope.yaml"), context)
    base.close()


def test_config_without_env_reward(env):
    raw = gym.make("ALFWorld-Rubric-v0", reward="none").unwrapped
    wrapped = attach_reward(raw, TRCAConfig(keep_env_reward=False), get_spec("ALFWorld").reward_context())
    task = task_of_type(env, "pick_and_place_simple")
    wrapped.reset(seed=0, options={"task_id": task})
    for cmd in raw.adapter.expert_plan():
        _, reward, term, _, info = wrapped.step(act(cmd))
    assert term and reward == pytest.approx(info["trca"]["r_TRCA"])
    wrapped.close()


@pytest.mark.slow
def test_every_evidence_and_execution_operator_fires_over_expert_walkthroughs(env):
    lib = load_library(operator_library("ALFWorld"))
    fired = collections.Counter()
    wins = 0
    for task in env.unwrapped.adapter.task_ids():
        records = play_expert(env, task)
        wins += records[-1]["env_reward"] == 1.0
        for r in records:
            fired.update(i for i, v in r["trca"]["judgments"].items() if v)
    coverable = {o.id for o in lib.operators if o.category != "invalidity"}
    documented = {o.id for o in lib.operators if o.expert_note}
    assert coverable - documented <= set(fired), f"never fired: {coverable - set(fired)}"
    assert wins == len(env.unwrapped.adapter.task_ids())
