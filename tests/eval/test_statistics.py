"""The success statistics of ``rubricgym eval`` and the trainer's evaluation, against brute
force (every k-subset of the samples) and scipy's exact binomial test."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.trainers.statistics import mcnemar_exact, pass_at_k, pass_hat_k


@st.composite
def samples(draw):
    n = draw(st.integers(1, 8))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@given(samples())
def test_pass_at_k_and_pass_hat_k_are_the_means_over_every_k_subset(nck):
    n, c, k = nck
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))
    assert pass_hat_k(n, c, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


@given(st.integers(0, 40), st.integers(0, 40))
def test_mcnemar_is_the_exact_two_sided_binomial_test(a, b):
    from scipy.stats import binomtest

    expected = 1.0 if a + b == 0 else binomtest(a, a + b, 0.5).pvalue
    assert mcnemar_exact(a, b) == pytest.approx(expected, rel=1e-9) and mcnemar_exact(a, b) == mcnemar_exact(b, a)


def test_impossible_counts_are_refused():
    for bad in ((3, 4, 1), (3, 1, 0), (3, 1, 4)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)
