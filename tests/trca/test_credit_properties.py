"""Property tests for every guarantee of docs/design.md §4 (rubricgym.credit.trca / grpo)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from credit_helpers import array_rollout

from rubricgym.estimators import MissingCreditInput, group_step_advantages
from rubricgym.credit.grpo import grpo_step_advantages, standardize
from rubricgym.credit.trca import (
    CATEGORIES,
    RolloutSignals,
    completion_aware_returns,
    coverable_mask,
    discounted_returns,
    episode_advantages,
    item_weights,
    step_advantages,
    trca_advantages,
    trca_rewards,
)

TOL = 1e-9
budget = st.floats(0.01, 10.0, allow_nan=False)
lam_st = st.floats(0.0, 1.0)


@st.composite
def library_shape(draw):
    """Categories with every category present (as the validator requires), in any order."""
    counts = [draw(st.integers(1, 5)) for _ in CATEGORIES]
    cats = [c for c, n in zip(CATEGORIES, counts) for _ in range(n)]
    return draw(st.permutations(cats))


@st.composite
def episode(draw, min_len=0, max_len=40):
    cats = draw(library_shape())
    t = draw(st.integers(min_len, max_len))
    density = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))  # fast for long episodes
    return cats, (rng.random((t, len(cats))) < density).astype(np.int8)


@given(episode(), budget, st.floats(-10, 10, allow_nan=False), budget, lam_st)
def test_step_reward_bounds(ep, r_evi, r_inval, r_exec, lam):
    cats, o = ep
    r = trca_rewards(o, cats, r_evi, r_inval, r_exec, lam)
    assert np.all(r.r_trca >= -(1 - lam) * abs(r_inval) - TOL)
    assert np.all(r.r_trca <= r_evi + r_exec + TOL)


@given(episode(max_len=500), budget, budget, budget)
def test_breakthrough_sum_bounded_whatever_the_length(ep, r_evi, r_inval, r_exec):
    cats, o = ep
    r = trca_rewards(o, cats, r_evi, r_inval, r_exec)
    assert np.all(r.r_b >= -TOL)
    assert r.r_b.sum() <= r_evi + r_exec + TOL


@given(episode(), budget, budget, budget, lam_st)
def test_online_updates_equal_batch(ep, r_evi, r_inval, r_exec, lam):
    """The wrapper's one-row-at-a-time use of the formulas gives the batch result."""
    cats, o = ep
    batch = trca_rewards(o, cats, r_evi, r_inval, r_exec, lam)
    cov = np.zeros(len(cats))
    for t in range(o.shape[0]):
        step = trca_rewards(o[t:t + 1], cats, r_evi, r_inval, r_exec, lam, initial_coverage=cov)
        assert step.r_trca[0] == pytest.approx(batch.r_trca[t])
        cov = step.coverage[-1]
        assert np.array_equal(cov, batch.coverage[t])


@given(episode(min_len=1))
def test_coverage_only_for_evidence_and_execution(ep):
    cats, o = ep
    r = trca_rewards(o, cats, 1.0, 1.0, 1.0)
    inval = np.array([c == "invalidity" for c in cats])
    assert not r.coverage[:, inval].any()
    w = item_weights(cats, 1.0, 1.0, 1.0)
    assert r.r_f == pytest.approx(o @ w)


def test_foundational_reward_per_category():
    cats = ["evidence", "evidence", "invalidity", "execution"]
    o = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    r = trca_rewards(o, cats, 0.5, -0.3, 2.0, lam=0.0)
    assert r.r_f == pytest.approx([0.25, -0.3, 0.5 + 2.0])
    r = trca_rewards(o, cats, 0.5, -0.3, 2.0, lam=1.0)
    assert r.r_b == pytest.approx([0.25, 0.0, 0.25 + 2.0])  # item 0 already covered at step 2


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=30), st.floats(0.01, 1.0))
def test_discounted_returns_match_definition(rewards, gamma):
    got = discounted_returns(np.array(rewards), gamma)
    want = [sum(gamma ** (k - t) * rewards[k] for k in range(t, len(rewards))) for t in range(len(rewards))]
    assert got == pytest.approx(want, abs=1e-9)


@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=16))
def test_standardize(values):
    z = standardize(values)
    if max(values) == min(values):
        assert np.all(z == 0.0)
    else:
        assert abs(z.mean()) < 1e-6
        assert np.all(np.sign(z) == np.sign(np.array(values) - np.mean(values)) * (np.abs(z) > 0))


ragged_group = st.integers(2, 8).flatmap(
    lambda g: st.lists(st.integers(1, 12), min_size=g, max_size=g))


@given(ragged_group, st.sampled_from([0.0, 1.0]), st.data())
def test_uniform_outcome_group_has_zero_episode_advantage_yet_signed_step_advantages(lengths, outcome, data):
    """All-fail and all-success groups: A_E = 0; a context group with differing returns still
    gets step advantages of both signs."""
    g = len(lengths)
    env = [np.zeros(n) for n in lengths]
    for e in env:
        e[-1] = outcome
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    step = [rng.uniform(-1, 1, n) * data.draw(st.sampled_from([0.0, 1.0])) for n in lengths]
    keys = [["start" if t == 0 else f"r{i}-t{t}" for t in range(n)] for i, n in enumerate(lengths)]
    assert np.all(episode_advantages([e.sum() for e in env]) == 0.0)
    adv = trca_advantages(env, step, keys)
    returns = [completion_aware_returns(e, s) for e, s in zip(env, step)]
    # step 0 of every rollout shares the context "start": a group of g >= 2 members
    first = np.array([r[0] for r in returns])
    assume(first.max() - first.min() > 1e-6)
    a0 = np.array([a[0] for a in adv])
    assert (a0 > 0).any() and (a0 < 0).any()
    assert g >= 2


@given(ragged_group, st.data())
def test_step_advantage_zero_for_singletons_and_equal_returns(lengths, data):
    returns = [np.array(data.draw(st.lists(st.floats(-3, 3, allow_nan=False), min_size=n, max_size=n))) for n in lengths]
    keys = [[f"r{i}-t{t}" for t in range(n)] for i, n in enumerate(lengths)]  # all unique
    assert all(np.all(a == 0.0) for a in step_advantages(returns, keys))
    same = [np.full(n, 0.7) for n in lengths]
    shared = [["k"] * n for n in lengths]
    assert all(np.all(a == 0.0) for a in step_advantages(same, shared))
    blank = [[""] * n for n in lengths]  # no context from the adapter: no group
    assert all(np.all(a == 0.0) for a in step_advantages(returns, blank))


def test_context_groups_standardize_within_the_group_only():
    returns = [np.array([1.0, 5.0]), np.array([3.0, 9.0])]
    keys = [["a", "b"], ["a", "c"]]
    a = step_advantages(returns, keys, eps=0.0)
    assert a[0][0] == pytest.approx(-1.0) and a[1][0] == pytest.approx(1.0)
    assert a[0][1] == 0.0 and a[1][1] == 0.0  # singleton groups


@given(ragged_group, st.data())
def test_estimators_by_name(lengths, data):
    signals = []
    for n in lengths:
        floats = st.lists(st.floats(-1, 1, allow_nan=False), min_size=n, max_size=n)
        env = np.zeros(n)
        env[-1] = data.draw(st.sampled_from([0.0, 1.0]))
        signals.append(RolloutSignals(r_f=data.draw(floats), r_b=data.draw(floats), env_rewards=env,
                                      context_keys=[f"s{t % 2}" for t in range(n)]))
    rollouts = [array_rollout(r.env_rewards, r.context_keys, r.r_f, r.r_b) for r in signals]
    envs = [r.env_rewards for r in signals]
    keys = [r.context_keys for r in signals]
    no_rf = group_step_advantages("trca_no_rf", rollouts)
    no_rb = group_step_advantages("trca_no_rb", rollouts)
    full = group_step_advantages("trca", rollouts, lam=0.8)
    for got, step in ((no_rf, [r.r_b for r in signals]), (no_rb, [r.r_f for r in signals]),
                      (full, [0.2 * r.r_f + 0.8 * r.r_b for r in signals])):
        want = trca_advantages(envs, step, keys)
        assert all(np.allclose(a, b) for a, b in zip(got, want))
    grpo = group_step_advantages("grpo", rollouts)
    want = grpo_step_advantages([e.sum() for e in envs], lengths)
    assert all(np.array_equal(a, b) and np.all(a == a[0]) for a, b in zip(grpo, want))


def test_unknown_estimator_and_bad_shapes_raise():
    r = array_rollout([1.0], ["a"], [0.0], [0.0])
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        group_step_advantages("ppo", [r])
    with pytest.raises(MissingCreditInput, match="needs a DRACO judge"):
        group_step_advantages("draco", [r])
    with pytest.raises(ValueError, match="shape"):
        RolloutSignals(r_f=[0.0, 1.0], r_b=[0.0], env_rewards=[1.0], context_keys=["a"])
    with pytest.raises(ValueError, match="lambda"):
        trca_rewards(np.zeros((1, 3)), list(CATEGORIES), 1, 1, 1, lam=1.5)


@given(episode(min_len=1), budget, budget, budget, st.floats(0.01, 1.0), st.data())
def test_new_coverage_of_any_size_strictly_beats_the_repeat(ep, r_evi, r_inval, r_exec, lam, data):
    """Prop. 2 for coverage differences of any size: a step that newly covers a set S of
    Evidence/Execution items (1 <= |S| <= all) earns strictly more r_TRCA than the same step
    when S was already covered, whatever else is covered."""
    cats, o = ep
    coverable = list(np.flatnonzero(coverable_mask(cats)))
    chosen = data.draw(st.lists(st.sampled_from(coverable), min_size=1, max_size=len(coverable), unique=True))
    row = o[-1].copy()
    row[chosen] = 1
    prior = coverable_mask(cats).astype(float) * data.draw(
        st.lists(st.integers(0, 1), min_size=len(cats), max_size=len(cats)).map(np.array))
    fresh, seen = prior.copy(), prior.copy()
    fresh[chosen], seen[chosen] = 0.0, 1.0
    new = trca_rewards(row[None], cats, r_evi, r_inval, r_exec, lam, initial_coverage=fresh).r_trca[0]
    old = trca_rewards(row[None], cats, r_evi, r_inval, r_exec, lam, initial_coverage=seen).r_trca[0]
    assert new > old
