"""Property tests of every docs/design.md §5 step-credit guarantee (rubricgym.credit.draco)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rubricgym.credit import draco
from rubricgym.credit.draco import DracoVariant

ADV = st.floats(min_value=-5, max_value=5, allow_nan=False, allow_infinity=False)


@st.composite
def steps(draw, min_steps: int = 1, max_steps: int = 12, min_tokens: int = 1):
    m = draw(st.integers(min_steps, max_steps))
    n = np.array(draw(st.lists(st.integers(min_tokens, 300), min_size=m, max_size=m)))
    p = np.array(draw(st.lists(st.integers(0, 6), min_size=m, max_size=m)))
    f = np.array(draw(st.lists(st.integers(0, 6), min_size=m, max_size=m)))
    return n, p, f


def close(a, b) -> bool:
    return np.allclose(a, b, rtol=1e-9, atol=1e-9)


@settings(max_examples=150, deadline=None)
@given(ADV, steps())
def test_push_is_conserved(A, s):
    n, p, f = s
    a = draco.cited_step_advantages(A, n, p, f)
    assert np.isclose(np.sum(n * a), A * n.sum(), rtol=1e-9, atol=1e-8)


@settings(max_examples=150, deadline=None)
@given(ADV, steps())
def test_no_step_has_opposite_sign(A, s):
    a = draco.cited_step_advantages(A, *s)
    if A > 0:
        assert np.all(a >= 0)
    elif A < 0:
        assert np.all(a <= 0)
    else:
        assert np.all(a == 0)


@settings(max_examples=60, deadline=None)
@given(ADV, steps(min_steps=2), st.data())
def test_step_total_does_not_depend_on_its_token_count(A, s, data):
    """Changing n_j redistributes nothing: every step's share n_k*a_k / (A*N) stays put,
    and with N held fixed (tokens moved between steps) every n_k*a_k is unchanged."""
    n, p, f = s
    assume((p + f).sum() > 0)  # uncited rollouts are plain GRPO by definition (a_j = A_i)
    j = data.draw(st.integers(0, len(n) - 1))
    n2 = n.copy()
    n2[j] = data.draw(st.integers(1, 500))
    a, a2 = draco.cited_step_advantages(A, n, p, f), draco.cited_step_advantages(A, n2, p, f)
    assert close(n * a / n.sum(), n2 * a2 / n2.sum())
    # N fixed: move tokens from step j to step k
    k = (j + 1) % len(n)
    moved = data.draw(st.integers(0, int(n[j]) - 1))
    n3 = n.copy()
    n3[j] -= moved
    n3[k] += moved
    assert close(n * a, n3 * draco.cited_step_advantages(A, n3, p, f))


@settings(max_examples=60, deadline=None)
@given(ADV, st.floats(min_value=0.01, max_value=100), steps())
def test_scaling_rewards_scales_all_steps_alike(A, c, s):
    a = draco.cited_step_advantages(A, *s)
    assert close(draco.cited_step_advantages(c * A, *s), c * a)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=0.01, max_value=5), steps())
def test_loser_mirrors_winner(A, s):
    """Weight of Q on a loser equals weight of 1-Q on a winner: swapping passes and fails
    (Q -> 1-Q, also for the uncited mean) mirrors the step advantages."""
    n, p, f = s
    q = draco.step_quality(p, f)
    if q is not None:
        assert close(draco.step_weights(-A, q), draco.step_weights(A, 1 - q))
    assert close(draco.cited_step_advantages(-A, n, p, f), -draco.cited_step_advantages(A, n, f, p))


@settings(max_examples=60, deadline=None)
@given(ADV, st.lists(st.integers(1, 300), min_size=1, max_size=12))
def test_no_citation_falls_back_to_grpo(A, tokens):
    n = np.array(tokens)
    zeros = np.zeros_like(n)
    assert close(draco.cited_step_advantages(A, n, zeros, zeros), np.full(len(n), A))


@settings(max_examples=60, deadline=None)
@given(ADV, st.lists(st.integers(1, 300), min_size=1, max_size=12), st.integers(1, 5), st.integers(0, 5))
def test_equal_weights_give_equal_shares(A, tokens, pp, ff):
    """Every step cited with the same p/f -> equal weights -> A*N/(M*n_j)."""
    n = np.array(tokens)
    p = np.full(len(n), pp)
    f = np.full(len(n), ff)
    expected = A * n.sum() / (len(n) * n)
    assert close(draco.cited_step_advantages(A, n, p, f), expected)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=0.01, max_value=5), st.lists(st.integers(1, 300), min_size=1, max_size=12), st.data())
def test_all_zero_weights_give_equal_shares(A, tokens, data):
    """A winner whose cited steps all failed (Q = 0 everywhere, uncited take the mean 0)
    and a loser whose cited steps all passed both have all-zero weights."""
    n = np.array(tokens)
    cited = np.array(data.draw(st.lists(st.booleans(), min_size=len(n), max_size=len(n))))
    assume(cited.any())
    k = np.where(cited, 2, 0)
    zeros = np.zeros_like(n)
    expected = n.sum() / (len(n) * n)
    assert close(draco.cited_step_advantages(A, n, zeros, k), A * expected)  # winner, only fails
    assert close(draco.cited_step_advantages(-A, n, k, zeros), -A * expected)  # loser, only passes


def test_worked_example():
    # steps: 0 cited by 2 passes, 1 by 1 fail, 2 uncited (Q-bar = 0.5)
    n = np.array([10, 20, 10])
    p, f = np.array([2, 0, 0]), np.array([0, 1, 0])
    q = draco.step_quality(p, f)
    assert close(q, [1.0, 0.0, 0.5])
    a = draco.cited_step_advantages(1.0, n, p, f)  # w = [1, 0, .5], sum 1.5, N = 40
    assert close(a, [1.0 * 40 * 1 / (10 * 1.5), 0.0, 40 * 0.5 / (10 * 1.5)])
    b = draco.cited_step_advantages(-1.0, n, p, f)  # w = [0, 1, .5]
    assert close(b, [0.0, -40 / (20 * 1.5), -40 * 0.5 / (10 * 1.5)])


def test_zero_token_steps_get_nothing_and_conserve():
    n = np.array([0, 5, 5])
    a = draco.cited_step_advantages(2.0, n, np.array([3, 1, 0]), np.array([0, 1, 0]))
    assert a[0] == 0.0
    assert np.isclose(np.sum(n * a), 2.0 * 10)


def test_zero_token_step_citations_count_in_q_bar():
    """n = [0, 10, 10]: step 1's failed citation must not be rescued by an equal share; the
    zero-token step's passed citation is evidence for Q-bar (step 3, uncited, takes 0.5)."""
    n = np.array([0, 10, 10])
    a = draco.cited_step_advantages(1.0, n, np.array([1, 0, 0]), np.array([0, 1, 0]))
    assert close(a, [0.0, 0.0, 2.0])  # step 2 gets 0, step 3 gets all of A * N = 20
    assert np.isclose(np.sum(n * a), 20.0)


@settings(max_examples=200)
@given(st.floats(-3, 3, allow_nan=False).filter(lambda x: abs(x) > 1e-3), st.data())
def test_zero_token_steps_take_no_credit_but_shape_q_bar(A, data):
    """Adding zero-token steps never gives them credit, conserves A*N over the live steps, and
    changes the live steps' credit exactly as their citations change Q-bar."""
    m = data.draw(st.integers(1, 6))
    n = np.array(data.draw(st.lists(st.integers(0, 8), min_size=m, max_size=m)))
    p = np.array(data.draw(st.lists(st.integers(0, 3), min_size=m, max_size=m)))
    f = np.array(data.draw(st.lists(st.integers(0, 3), min_size=m, max_size=m)))
    a = draco.cited_step_advantages(A, n, p, f)
    assert np.all(a[n == 0] == 0.0)
    if np.any(n > 0):
        assert np.isclose(np.sum(n * a), A * n.sum())
    q = draco.step_quality(p, f)
    if q is not None and np.any(n > 0):  # the live steps' credit equals the rule applied with the full Q-bar
        live = n > 0
        w = draco.step_weights(A, q[live])
        if w.sum() > 1e-12 and np.ptp(w) > 1e-12:
            assert close(a[live], A * n[live].sum() * w / (n[live] * w.sum()))


def test_bad_inputs_raise_clearly():
    with pytest.raises(ValueError):
        draco.cited_step_advantages(1.0, [1, 2], [0], [0, 0])
    with pytest.raises(ValueError):
        draco.cited_step_advantages(1.0, [-1], [0], [0])
    with pytest.raises(ValueError):
        draco.step_quality(np.array([-1]), np.array([0]))


def test_dropout_reward_and_advantage():
    P, F, NA, U = draco.VERDICT_PASS, draco.VERDICT_FAIL, draco.VERDICT_NOT_APPLICABLE, draco.VERDICT_UNANSWERED
    v = np.array([
        [P, P, F, NA, U],
        [P, F, P, NA, P],
        [P, P, P, NA, P],
    ])
    keep = draco.discriminative_dropout(v)
    assert keep.tolist() == [False, True, True, False, False]  # column 0 all pass; 3 never applicable; 4 unanswered != fail
    r = draco.rubric_rewards(v, keep)
    assert close(r, [0.0, 0.0, 1.0])
    A = draco.group_advantages(r)
    assert close(A.mean(), 0.0) and A[2] > 0 > A[0]
    assert close(draco.group_advantages(np.array([0.3, 0.3])), [0.0, 0.0])
    # 0/0: nothing surviving applies -> R = 0
    assert close(draco.rubric_rewards(np.array([[NA, U]]), None), [0.0])


def test_citation_counts_use_only_surviving_pass_fail():
    verdicts = np.array([draco.VERDICT_PASS, draco.VERDICT_FAIL, draco.VERDICT_PASS, draco.VERDICT_NOT_APPLICABLE])
    cites = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 0], [1, 1, 1]], dtype=bool)
    p, f = draco.citation_counts(verdicts, cites, np.array([True, True, False, True]))
    assert p.tolist() == [1, 1, 0] and f.tolist() == [0, 1, 1]


@settings(max_examples=60, deadline=None)
@given(ADV, steps(), st.integers(0, 20))
def test_expand_to_tokens_places_steps_and_zero_gaps(A, s, gap):
    n, p, f = s
    a = draco.cited_step_advantages(A, n, p, f)
    spans, pos = [], gap
    for nj in n:
        spans.append((pos, pos + int(nj)))
        pos += int(nj) + gap
    total = pos
    tok = draco.expand_to_tokens(a, spans, total)
    assert draco.span_token_counts(spans).tolist() == n.tolist()
    mask = np.zeros(total, bool)
    for (s0, e0), aj in zip(spans, a):
        assert np.all(tok[s0:e0] == aj)
        mask[s0:e0] = True
    assert np.all(tok[~mask] == 0)
    assert np.isclose(tok.sum(), A * n.sum(), atol=1e-8)


def test_expand_rejects_overlap_and_out_of_range():
    with pytest.raises(ValueError):
        draco.expand_to_tokens([1, 1], [(0, 3), (2, 4)], 5)
    with pytest.raises(ValueError):
        draco.expand_to_tokens([1], [(0, 9)], 5)


def test_variants_by_name():
    assert {v.value for v in DracoVariant} == {"static/no-credit", "static/credit", "dynamic/no-credit", "dynamic/credit"}
    assert DracoVariant.parse("full") is DracoVariant.DYNAMIC_CREDIT
    assert DracoVariant.parse("static_no_credit") is DracoVariant.STATIC_NO_CREDIT
    assert DracoVariant.STATIC_CREDIT.step_credit and not DracoVariant.STATIC_CREDIT.dynamic
    assert DracoVariant.DYNAMIC_NO_CREDIT.dynamic and not DracoVariant.DYNAMIC_NO_CREDIT.step_credit
    with pytest.raises(ValueError):
        DracoVariant.parse("nonsense")
    n, p, f = [3, 4], [1, 0], [0, 1]
    assert close(draco.draco_step_advantages("static/no-credit", 0.7, n, p, f), [0.7, 0.7])
    assert close(draco.draco_step_advantages("full", 0.7, n, p, f), draco.cited_step_advantages(0.7, n, p, f))
