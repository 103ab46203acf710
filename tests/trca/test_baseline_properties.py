"""The papers' baselines (docs/design.md §4b): RLOO and GiGPO against hand-computed cases and
as properties, and their dispatch through the estimator registry and the trainer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from credit_helpers import array_rollout

from rubricgym.contract import Trajectory
from rubricgym.credit.baselines import gigpo_step_advantages, rloo_advantages, rloo_step_advantages
from rubricgym.estimators import MissingCreditInput, get_estimator, group_step_advantages
from rubricgym.credit.grpo import center, standardize
from rubricgym.credit.trca import discounted_returns

TOL = 1e-9
returns_st = st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=12)


def test_rloo_hand_computed():
    # R = [1, 0, 0, 0]: 1 - 0 = 1; 0 - (1 + 0 + 0)/3 = -1/3
    assert np.allclose(rloo_advantages([1.0, 0.0, 0.0, 0.0]), [1.0, -1 / 3, -1 / 3, -1 / 3])
    # R = [3, 1, 2]: 3 - 1.5, 1 - 2.5, 2 - 2
    assert np.allclose(rloo_advantages([3.0, 1.0, 2.0]), [1.5, -1.5, 0.0])
    assert rloo_advantages([5.0]).tolist() == [0.0] and rloo_advantages([2.0, 2.0]).tolist() == [0.0, 0.0]
    steps = rloo_step_advantages([1.0, 0.0], [3, 1])
    assert [s.tolist() for s in steps] == [[1.0, 1.0, 1.0], [-1.0]]


@given(returns_st)
def test_rloo_sums_to_zero_and_is_the_scaled_centred_return(returns):
    adv = rloo_advantages(returns)
    g = len(returns)
    assert abs(adv.sum()) < 1e-6 * max(1.0, np.abs(returns).max())
    if max(returns) != min(returns):
        assert np.allclose(adv, g / (g - 1) * (np.asarray(returns) - np.mean(returns)), atol=1e-9)
    # the leave-one-out baseline never depends on the rollout's own return
    for i in range(g):
        others = [r for j, r in enumerate(returns) if j != i]
        assert abs(adv[i] - (returns[i] - np.mean(others))) < 1e-6 or max(returns) == min(returns)


def test_gigpo_hand_computed():
    """Two rollouts of one task, gamma 0.5. Won: env rewards [0, 1]; lost: [0, 0].
    A_E = standardize([1, 0]) = [1, -1]. Returns: won [0.5, 1.0], lost [0, 0].
    Step 0 of both acted on 's0': A_S = standardize([0.5, 0]) = [1, -1]; the second steps
    acted on different observations: A_S = 0."""
    adv = gigpo_step_advantages([[0.0, 1.0], [0.0, 0.0]], [["s0", "s1"], ["s0", "s2"]], gamma=0.5)
    assert np.allclose(adv[0], [2.0, 1.0], atol=1e-5) and np.allclose(adv[1], [-2.0, -1.0], atol=1e-5)
    # mean-only: A_E = [0.5, -0.5]; A_S at s0 = [0.25, -0.25]
    adv = gigpo_step_advantages([[0.0, 1.0], [0.0, 0.0]], [["s0", "s1"], ["s0", "s2"]], gamma=0.5, norm="mean")
    assert np.allclose(adv[0], [0.75, 0.5]) and np.allclose(adv[1], [-0.75, -0.5])
    # three rollouts, one revisits s0 later: its return there joins the same step group
    adv = gigpo_step_advantages([[0.0, 0.0, 1.0], [0.0, 0.0], [1.0]], [["s0", "s1", "s0"], ["s0", "s1"], ["s9"]],
                                gamma=1.0, omega=1.0)
    a_e = standardize([1.0, 0.0, 1.0])
    s0 = standardize([1.0, 0.0, 1.0])  # returns at s0: rollout 0 step 0 (1), rollout 1 step 0 (0), rollout 0 step 2 (1)
    s1 = standardize([1.0, 0.0])
    assert np.allclose(adv[0], [a_e[0] + s0[0], a_e[0] + s1[0], a_e[0] + s0[2]])
    assert np.allclose(adv[1], [a_e[1] + s0[1], a_e[1] + s1[1]]) and np.allclose(adv[2], [a_e[2]])


rollout_st = st.lists(st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=6), min_size=2, max_size=6)


@given(rollout_st)
def test_gigpo_with_distinct_anchors_is_the_episode_advantage(rewards):
    anchors = [[f"r{i}s{t}" for t in range(len(r))] for i, r in enumerate(rewards)]
    adv = gigpo_step_advantages(rewards, anchors)
    episode = standardize([sum(r) for r in rewards])
    for i, a in enumerate(adv):
        assert np.allclose(a, episode[i], atol=TOL)


@given(st.integers(2, 6), st.integers(1, 6), st.data())
def test_gigpo_with_shared_anchors_per_step_adds_the_standardized_returns(g, t, data):
    rewards = [data.draw(st.lists(st.floats(-1, 1, allow_nan=False), min_size=t, max_size=t)) for _ in range(g)]
    anchors = [[f"s{k}" for k in range(t)] for _ in range(g)]
    for norm, rule in (("std", standardize), ("mean", center)):
        adv = gigpo_step_advantages(rewards, anchors, gamma=0.9, norm=norm)
        returns = [discounted_returns(np.asarray(r), 0.9) for r in rewards]
        episode = rule([sum(r) for r in rewards])
        for k in range(t):
            step = rule([returns[i][k] for i in range(g)])
            for i in range(g):
                assert abs(adv[i][k] - (episode[i] + step[i])) < 1e-6


def test_gigpo_reads_anchor_observations_from_trajectories_and_refuses_signals_without_them():
    def trajectory(observations, rewards):
        return Trajectory.model_validate({
            "benchmark": "base", "task_id": "t", "initial_observation": "start",
            "transitions": [{"step": k, "response": "", "action": {"ok": True, "action": "x"}, "observation": o,
                             "facts": {}, "env_reward": r, "context_key": f"k{k}"}
                            for k, (o, r) in enumerate(zip(observations, rewards, strict=True))]})

    won = trajectory(["room", "done"], [0.0, 1.0])
    lost = trajectory(["hall", "end"], [0.0, 0.0])
    # step 0 of both acted on "start" (shared); step 1 on "room" vs "hall" (not shared)
    got = group_step_advantages("gigpo", [won, lost], gamma=0.5)
    assert np.allclose(got[0], [2.0, 1.0], atol=1e-5) and np.allclose(got[1], [-2.0, -1.0], atol=1e-5)
    # with the context key as the anchor both steps are shared
    got = group_step_advantages("gigpo_context", [won, lost], gamma=0.5)
    assert np.allclose(got[0], [2.0, 2.0], atol=1e-5)
    assert [a.tolist() for a in group_step_advantages("rloo", [won, lost])] == [[1.0, 1.0], [-1.0, -1.0]]
    without_anchors = [array_rollout([1.0], ["a"]), array_rollout([0.0], ["a"])]
    with pytest.raises(MissingCreditInput, match="needs each step's observation"):
        group_step_advantages("gigpo", without_anchors)
    assert get_estimator("gigpo").placement == "response" and get_estimator("rloo").needs == frozenset()
