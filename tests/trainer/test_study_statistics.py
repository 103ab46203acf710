"""The study's statistics on hand-computed cases (issue 52)."""

from __future__ import annotations

import math

import pytest

from rubricgym.trainers.study.statistics import (area_under_curve, band, paired_comparison, rise, sign_flip_p_value,
                                                 trajectories_to_target)


def test_band_is_the_mean_with_a_student_t_interval():
    # mean 0.2, sd 0.1, n 3: half-width t(0.975, 2) * 0.1 / sqrt(3) = 4.302653 * 0.057735 = 0.248414
    b = band([0.1, 0.2, 0.3])
    assert (b.mean, b.n) == (pytest.approx(0.2), 3)
    assert b.high - b.mean == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-5)
    assert not b.excludes_zero and band([1.0, 1.1, 0.9, 1.0]).excludes_zero
    assert band([0.5]) == band([0.5]) and band([0.5]).low == 0.5
    with pytest.raises(ValueError):
        band([])


def test_sign_flip_p_value_counts_the_patterns_at_least_as_extreme():
    # differences (1, 2, 3): |mean| 2; of the 8 sign patterns only (+,+,+) and (-,-,-) reach 2
    assert sign_flip_p_value([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    # (1, -1): |mean| 0, every pattern is at least as extreme
    assert sign_flip_p_value([1.0, -1.0]) == 1.0
    # ten seeds all better: 2 of 1024 patterns
    assert sign_flip_p_value([0.1] * 10) == pytest.approx(2 / 1024)


def test_paired_comparison_pairs_by_seed():
    a = {0: 0.5, 1: 0.6, 2: 0.7, 9: 1.0}
    b = {0: 0.4, 1: 0.4, 2: 0.4}
    c = paired_comparison(a, b)  # seed 9 has no partner: left out
    assert c.difference.n == 3 and c.difference.mean == pytest.approx(0.2)
    assert (c.a_better, c.b_better) == (3, 0) and c.p_sign_flip == pytest.approx(0.25)
    assert 0 < c.p_t_test < 0.1
    with pytest.raises(ValueError, match="no seed"):
        paired_comparison({0: 1.0}, {1: 1.0})


def test_area_target_and_rise():
    xs, ys = [32, 64, 96, 128], [0.0, 0.2, 0.4, 0.4]
    # trapezoids: (0+0.2)/2*32 + (0.2+0.4)/2*32 + 0.4*32 = 3.2 + 9.6 + 12.8 = 25.6, over 96
    assert area_under_curve(xs, ys) == pytest.approx(25.6 / 96)
    assert trajectories_to_target(xs, ys, 0.4) == 96
    assert trajectories_to_target(xs, ys, 0.3, window=2) == 96  # (0.2 + 0.4) / 2 = 0.3
    assert trajectories_to_target(xs, ys, 0.9) is None
    assert rise(ys, 2) == pytest.approx(0.4 - 0.1)
    with pytest.raises(ValueError):
        rise(ys, 3)
