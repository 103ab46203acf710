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


def test_the_llm_study_reports_bands_and_paired_comparisons_per_seed():
    """``rubricgym study --policy llm``'s statistics (trainers/study/llm.py::seed_statistics):
    two estimators x three seeds x three iterations of 4 trajectories, by hand."""
    from rubricgym.trainers.study.llm import _statistics_lines, seed_statistics

    curves = {("grpo", 0): [0.0, 0.25, 0.25], ("grpo", 1): [0.0, 0.0, 0.5], ("grpo", 2): [0.25, 0.25, 0.25],
              ("trca", 0): [0.0, 0.5, 0.75], ("trca", 1): [0.0, 0.25, 0.5], ("trca", 2): [0.25, 0.5, 0.5]}
    rows = [{"estimator": e, "seed": s, "trajectories": 4 * (i + 1), "success_rate": y}
            for (e, s), ys in curves.items() for i, y in enumerate(ys)]
    held_out = [{"estimator": e, "seed": s, "success_rate": v}
                for (e, s), v in {("grpo", 0): 0.0, ("grpo", 1): 1 / 12, ("grpo", 2): 0.0,
                                  ("trca", 0): 1 / 12, ("trca", 1): 1 / 12, ("trca", 2): 2 / 12}.items()]
    stats = seed_statistics(rows, held_out, ["grpo", "trca"], window=2)
    # trapezoid mean over 4..12 trajectories: grpo seed 0 (0 + 2*0.25 + 0.25) / 4 = 0.1875
    assert stats["estimators"]["grpo"]["auc"]["mean"] == pytest.approx((0.1875 + 0.125 + 0.25) / 3)
    # final: the last two iterations; trca (0.625, 0.375, 0.5)
    assert stats["estimators"]["trca"]["final"]["mean"] == pytest.approx(0.5)
    assert stats["baseline"] == "grpo" and list(stats["paired_vs_baseline"]) == ["trca"]
    final = stats["paired_vs_baseline"]["trca"]["final"]
    # grpo's finals are 0.25 each: per-seed differences 0.375, 0.125, 0.25, all three favour trca;
    # exact sign flip: only (+,+,+) and (-,-,-) of the 8 patterns reach |mean| 0.25
    assert final["difference"]["mean"] == pytest.approx(0.25)
    assert (final["better"], final["worse"], final["p_sign_flip"]) == (3, 0, pytest.approx(0.25))
    held = stats["paired_vs_baseline"]["trca"]["held_out"]
    # differences 1/12, 0, 2/12: two seeds favour trca, one ties
    assert held["difference"]["mean"] == pytest.approx(1 / 12) and (held["better"], held["worse"]) == (2, 0)
    text = "\n".join(_statistics_lines(stats))
    # trca's areas (0.4375, 0.25, 0.4375): 37.5 %
    assert "| `trca` | 37.5 [" in text and "p=0.250 /" in text and "3/0" in text
