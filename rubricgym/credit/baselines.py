"""The baselines the TRCA and DRACO papers compare against: RLOO and GiGPO, as pure numpy
functions with documented shapes (docs/design.md, "Baselines").

* RLOO (Ahmadian et al. 2024): ``A_i = R_i - mean_{j != i} R_j`` over the group's episode
  returns, the same value on every step of rollout i (GRPO's placement).
* GiGPO (Feng et al. 2025): ``A = A_E + omega * A_S`` with omega = 1. ``A_E`` is GRPO's
  episode-level group advantage; ``A_S`` groups the steps of a task group whose *anchor state*
  is identical (the exact observation text before the action, or the benchmark's own context
  key) and normalises each step's discounted return of the env reward alone (no rubric
  reward) within its step group. Both use the same rule: ``"std"`` = rubricgym's one
  standardization (``rubricgym.credit.grpo.standardize``), ``"mean"`` = mean-centring only
  (``center``, verl-agent's default mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from rubricgym.credit.grpo import DEFAULT_EPS, as_group_values, center, standardize
from rubricgym.credit.trca import DEFAULT_GAMMA, context_groups, discounted_returns

__all__ = ["GIGPO_OMEGA", "Norm", "gigpo_step_advantages", "group_normalize", "rloo_advantages",
           "rloo_step_advantages"]

Norm = Literal["std", "mean"]
GIGPO_OMEGA = 1.0  # the paper's weight of the step-level advantage


def group_normalize(values: Sequence[float] | np.ndarray, norm: Norm = "std", eps: float = DEFAULT_EPS) -> np.ndarray:
    """``standardize`` (``"std"``) or ``center`` (``"mean"``) of one group's values (shape ``[n]``)."""
    if norm == "std":
        return standardize(values, eps)
    if norm == "mean":
        return center(values)
    raise ValueError(f"norm must be 'std' or 'mean', got {norm!r}")


def rloo_advantages(returns: Sequence[float] | np.ndarray) -> np.ndarray:
    """``A_i = R_i - mean_{j != i} R_j`` (shape ``[G]``); all zeros when G < 2 or every return
    is equal (no other rollout to compare with, or nothing to prefer).

    >>> rloo_advantages([1.0, 0.0, 0.0, 0.0]).round(3).tolist()
    [1.0, -0.333, -0.333, -0.333]
    """
    x = as_group_values(returns, "rloo_advantages")
    if x.size < 2 or x.max() == x.min():
        return np.zeros_like(x)
    return x - (x.sum() - x) / (x.size - 1)


def rloo_step_advantages(returns: Sequence[float] | np.ndarray, lengths: Sequence[int]) -> list[np.ndarray]:
    """RLOO broadcast uniformly to every step of each (ragged) rollout."""
    adv = rloo_advantages(returns)
    if len(lengths) != adv.size:
        raise ValueError(f"{adv.size} returns but {len(lengths)} rollout lengths")
    return [np.full(int(n), a, dtype=np.float64) for a, n in zip(adv, lengths, strict=True)]


def gigpo_step_advantages(
    env_rewards: Sequence[Sequence[float] | np.ndarray],
    anchors: Sequence[Sequence[str]],
    outcomes: Sequence[float] | np.ndarray | None = None,
    omega: float = GIGPO_OMEGA,
    gamma: float = DEFAULT_GAMMA,
    norm: Norm = "std",
    eps: float = DEFAULT_EPS,
) -> list[np.ndarray]:
    """GiGPO's ``A_E + omega * A_S`` per step, for a group of rollouts of one task.

    ``env_rewards[i]``: rollout i's env rewards per step (shape ``[T_i]``); ``anchors[i][t]``:
    the anchor state of step t (an empty anchor is in no step group); ``outcomes``: the
    episode returns for ``A_E`` (default: the summed env rewards). A step whose anchor no
    other step of the group shares gets ``A_S = 0``.

    >>> won, lost = [0.0, 1.0], [0.0, 0.0]
    >>> [a.round(2).tolist() for a in gigpo_step_advantages([won, lost], [["s0", "s1"], ["s0", "s2"]], gamma=0.5)]
    [[2.0, 1.0], [-2.0, -1.0]]
    """
    rewards = [np.asarray(r, dtype=np.float64) for r in env_rewards]
    if len(rewards) != len(anchors):
        raise ValueError(f"{len(rewards)} reward arrays but {len(anchors)} anchor lists")
    for i, (r, a) in enumerate(zip(rewards, anchors, strict=True)):
        if r.ndim != 1 or r.shape[0] != len(a):
            raise ValueError(f"rollout {i}: {r.shape} env rewards but {len(a)} anchors")
    totals = [float(r.sum()) for r in rewards] if outcomes is None else list(outcomes)
    if len(totals) != len(rewards):
        raise ValueError(f"{len(totals)} outcomes for {len(rewards)} rollouts")
    episode = group_normalize(totals, norm, eps)
    returns = [discounted_returns(r, gamma) for r in rewards]
    step = [np.zeros_like(r) for r in returns]
    for members in context_groups(anchors).values():
        if len(members) < 2:
            continue
        values = group_normalize([returns[i][t] for i, t in members], norm, eps)
        for (i, t), value in zip(members, values, strict=True):
            step[i][t] = value
    return [episode[i] + omega * step[i] for i in range(len(rewards))]
