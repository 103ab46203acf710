"""The study's statistics: bands over seeds, paired comparisons, areas, budgets to a target.

Pure functions of arrays. Seeds are the unit: a band is the mean over seeds with a Student-t
95% interval (the seeds' spread, not the rollouts'); a comparison pairs each seed's value
under two estimators (same tasks, same initial states) and tests the mean difference with an
exact sign-flip permutation test (every one of the 2^n sign patterns for n <= 20 seeds) and
a paired t-test.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

__all__ = ["Band", "PairedComparison", "area_under_curve", "band", "paired_comparison", "rise",
           "sign_flip_p_value", "trajectories_to_target", "format_band"]

EXACT_SIGN_FLIPS = 20  # up to 2^20 patterns: exact; beyond, a seeded Monte Carlo of 2^20 draws


@dataclass(frozen=True)
class Band:
    """Mean over seeds and its 95% t-interval (``low == high == mean`` for one seed)."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        return self.n > 1 and (self.low > 0 or self.high < 0)

    def as_dict(self) -> dict[str, float]:
        """The band as the studies' result files record it."""
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


def format_band(b: dict[str, float] | None) -> str:
    """A recorded band in percent for the reports' tables: ``mean [low, high]`` (``-``: none)."""
    if b is None:
        return "-"
    return f"{100 * b['mean']:.1f} [{100 * b['low']:.1f}, {100 * b['high']:.1f}]"


def band(values: Sequence[float], confidence: float = 0.95) -> Band:
    """Mean and t-interval of per-seed values.

    >>> b = band([0.1, 0.2, 0.3])
    >>> round(b.mean, 3), round(b.low, 3), round(b.high, 3)
    (0.2, -0.048, 0.448)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("a band needs one value per seed")
    mean = float(x.mean())
    if x.size == 1:
        return Band(mean, mean, mean, 1)
    half = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Band(mean, mean - half, mean + half, int(x.size))


def sign_flip_p_value(differences: Sequence[float]) -> float:
    """Two-sided p-value of the mean paired difference being 0: the share of sign patterns
    whose |mean| is at least the observed one (exact for n <= 20).

    >>> sign_flip_p_value([1.0, 1.0, 1.0, 1.0])  # 2 of 16 patterns are as extreme
    0.125
    >>> sign_flip_p_value([0.0, 0.0])
    1.0
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        raise ValueError("a paired test needs at least one pair")
    observed = abs(d.mean())
    if d.size <= EXACT_SIGN_FLIPS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    else:
        signs = np.random.default_rng(0).choice((1.0, -1.0), size=(1 << EXACT_SIGN_FLIPS, d.size))
    means = np.abs((signs * d).mean(axis=1))
    return float(np.mean(means >= observed - 1e-12))


@dataclass(frozen=True)
class PairedComparison:
    """``a`` minus ``b`` over the seeds both have: the mean difference with its band, the
    exact sign-flip p-value, the paired t-test's p-value, and how many seeds favour each."""

    difference: Band
    p_sign_flip: float
    p_t_test: float
    a_better: int
    b_better: int

    def as_dict(self) -> dict[str, Any]:
        """The comparison as the studies' result files record it (``better``/``worse``: seeds)."""
        return {"difference": self.difference.as_dict(), "p_sign_flip": self.p_sign_flip, "p_t_test": self.p_t_test,
                "better": self.a_better, "worse": self.b_better}


def paired_comparison(a: dict[int, float], b: dict[int, float]) -> PairedComparison:
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("no seed is in both")
    d = np.array([a[s] - b[s] for s in seeds], dtype=np.float64)
    if d.size > 1 and np.any(d != d[0]):
        p_t = float(sps.ttest_1samp(d, 0.0).pvalue)
    else:
        p_t = 1.0 if np.all(d == 0) else 0.0
    return PairedComparison(band(d), sign_flip_p_value(d), p_t, int(np.sum(d > 0)), int(np.sum(d < 0)))


def area_under_curve(trajectories: Sequence[int], success: Sequence[float]) -> float:
    """The mean success over the budget: the trapezoid area under success-vs-trajectories
    divided by the trajectories spanned (a number in [0, 1])."""
    x = np.asarray(trajectories, dtype=np.float64)
    y = np.asarray(success, dtype=np.float64)
    if x.size != y.size or x.size == 0:
        raise ValueError("one success value per budget point")
    if x.size == 1:
        return float(y[0])
    return float(np.trapezoid(y, x) / (x[-1] - x[0]))


def trajectories_to_target(trajectories: Sequence[int], success: Sequence[float], target: float,
                           window: int = 1) -> int | None:
    """The first budget at which success, averaged over the last ``window`` points, reaches
    ``target`` (None: never)."""
    y = np.asarray(success, dtype=np.float64)
    for k in range(len(y)):
        if y[max(0, k - window + 1): k + 1].mean() >= target:
            return int(trajectories[k])
    return None


def rise(success: Sequence[float], window: int) -> float:
    """How much a curve rose: the mean of its last ``window`` points minus its first ``window``."""
    y = np.asarray(success, dtype=np.float64)
    if y.size < 2 * window:
        raise ValueError(f"a rise over windows of {window} needs at least {2 * window} points")
    return float(y[-window:].mean() - y[:window].mean())
