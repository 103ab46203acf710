"""Plain GRPO: one advantage per rollout, the group-standardized outcome, on every step.

``standardize`` is the single group-standardization rule shared by every estimator
(GRPO, TRCA's episode and step advantages, DRACO): population std (ddof=0), ``eps``
added to the std, and exactly 0 for a group whose values are all equal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_EPS = 1e-6
"""Added to the std. Small enough not to shrink real advantages (outcome stds are O(0.1..1)),
large enough to keep a near-degenerate group from exploding."""


def as_group_values(values: Sequence[float] | np.ndarray, who: str) -> np.ndarray:
    """``values`` as a finite 1-D float array (shape ``[n]``), else a ``ValueError`` naming ``who``."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{who} expects a 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{who}: values must be finite")
    return x


def standardize(values: Sequence[float] | np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """``(x - mean) / (std + eps)`` with the population std; all zeros when every value is equal.

    Zero variance is tested as ``max == min`` rather than ``std == 0``: the floating mean of
    equal values can leave a std of ~1e-17, which would otherwise leak tiny nonzero values.

    >>> standardize([1.0, 0.0, 0.0, 0.0]).round(3).tolist()
    [1.732, -0.577, -0.577, -0.577]
    >>> standardize([0.0, 0.0]).tolist()
    [0.0, 0.0]
    """
    x = as_group_values(values, "standardize")
    if x.size == 0 or x.max() == x.min():
        return np.zeros_like(x)
    return (x - x.mean()) / (x.std() + eps)


def center(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``x - mean``: the mean-only variant of ``standardize`` (the same zero rule: all zeros
    when every value is equal), for estimators that offer it (GiGPO's ``"mean"`` mode).

    >>> center([1.0, 0.0, 0.0, 0.0]).tolist()
    [0.75, -0.25, -0.25, -0.25]
    """
    x = as_group_values(values, "center")
    if x.size == 0 or x.max() == x.min():
        return np.zeros_like(x)
    return x - x.mean()


def grpo_advantages(outcomes: Sequence[float] | np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Per-rollout GRPO advantage: the group-standardized outcome (shape ``[G]``)."""
    return standardize(outcomes, eps)


def grpo_step_advantages(
    outcomes: Sequence[float] | np.ndarray, lengths: Sequence[int], eps: float = DEFAULT_EPS
) -> list[np.ndarray]:
    """GRPO broadcast uniformly to every step of each (ragged) rollout."""
    adv = grpo_advantages(outcomes, eps)
    if len(lengths) != adv.size:
        raise ValueError(f"{adv.size} outcomes but {len(lengths)} rollout lengths")
    return [np.full(int(n), a, dtype=np.float64) for a, n in zip(adv, lengths, strict=True)]
