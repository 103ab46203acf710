"""TRCA credit math (docs/design.md §4): every formula, as pure functions over numpy arrays.

Shapes: one rollout's judgments ``O`` are ``[T, J]`` (step ``t`` = row ``t``, i.e. the
paper's step ``t+1``; the paper's ``C[i,0,j] = 0`` is the coverage *before* row 0). A group
of ``G`` rollouts of one task is a list of per-rollout arrays (lengths differ).

Conventions (documented choices where docs/design.md leaves room):

* ``r_Inval`` may be given with either sign; only ``|r_Inval|`` is used.
* Group standardization is ``rubricgym.credit.grpo.standardize``: population std
  (ddof=0), ``eps = 1e-6`` added to the std, and exactly 0 when all values are equal.
* The episode advantage standardizes the rollouts' terminal outcomes (by default the sum of
  their sparse env rewards), so an all-fail or all-success group has ``A_E = 0``.
* Steps with an empty context key ("" or None: the adapter gave no structural context)
  join no context group and get ``A_S = 0``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from rubricgym.credit.grpo import DEFAULT_EPS, standardize

EVIDENCE = "evidence"
INVALIDITY = "invalidity"
EXECUTION = "execution"
CATEGORIES = (EVIDENCE, INVALIDITY, EXECUTION)
COVERABLE_CATEGORIES = (EVIDENCE, EXECUTION)

DEFAULT_LAMBDA = 0.8
DEFAULT_GAMMA = 0.95



# -- per-step rewards -------------------------------------------------------------------------
def item_weights(categories: Sequence[str], r_evi: float, r_inval: float, r_exec: float) -> np.ndarray:
    """Per-item value ``w_j``: +r_Evi/M_Evi, -|r_Inval|/M_Inval, +r_Exec/M_Exec (shape ``[J]``)."""
    cats = list(categories)
    unknown = sorted({c for c in cats if c not in CATEGORIES})
    if unknown:
        raise ValueError(f"unknown operator categories {unknown}; expected {CATEGORIES}")
    budget = {EVIDENCE: float(r_evi), INVALIDITY: -abs(float(r_inval)), EXECUTION: float(r_exec)}
    count = {c: cats.count(c) for c in CATEGORIES}
    return np.array([budget[c] / count[c] for c in cats], dtype=np.float64)


def coverable_mask(categories: Sequence[str]) -> np.ndarray:
    """True for the items coverage tracks (Evidence and Execution; never Invalidity)."""
    return np.array([c in COVERABLE_CATEGORIES for c in categories], dtype=bool)


def foundational_reward(judgments: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``r_F[t] = sum_j O[t, j] * w_j`` (shape ``[T]``)."""
    o = np.asarray(judgments, dtype=np.float64)
    return o @ np.asarray(weights, dtype=np.float64)


def coverage(judgments: np.ndarray, coverable: np.ndarray, initial: np.ndarray | None = None) -> np.ndarray:
    """``C[t, j] = max(initial_j, max_{k<=t} O[k, j])`` for coverable items, 0 for the rest.

    ``initial`` is the coverage before row 0 (zeros at the start of an episode)."""
    o = np.asarray(judgments, dtype=np.float64) * np.asarray(coverable, dtype=np.float64)
    if o.shape[0] == 0:
        return o
    if initial is not None:
        o = np.vstack([np.asarray(initial, dtype=np.float64)[None, :], o])
        return np.maximum.accumulate(o, axis=0)[1:]
    return np.maximum.accumulate(o, axis=0)


def potential(cov: np.ndarray, weights: np.ndarray, coverable: np.ndarray) -> np.ndarray:
    """``Phi = sum over coverable items of w_j * C_j`` (works on ``[T, J]`` or ``[J]``)."""
    w = np.asarray(weights, dtype=np.float64) * np.asarray(coverable, dtype=np.float64)
    return np.asarray(cov, dtype=np.float64) @ w


def breakthrough_reward(
    judgments: np.ndarray, weights: np.ndarray, coverable: np.ndarray, initial: np.ndarray | None = None
) -> np.ndarray:
    """``r_B[t] = Phi[t] - Phi[t-1]`` with ``Phi[-1]`` the potential of ``initial`` (0 by default)."""
    cov = coverage(judgments, coverable, initial)
    start = 0.0 if initial is None else float(potential(np.asarray(initial, dtype=np.float64), weights, coverable))
    phi = potential(cov, weights, coverable)
    return np.diff(np.concatenate([[start], phi]))


def mix(r_f: np.ndarray, r_b: np.ndarray, lam: float = DEFAULT_LAMBDA) -> np.ndarray:
    """``r_TRCA = (1 - lambda) * r_F + lambda * r_B``."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    return (1.0 - lam) * np.asarray(r_f, dtype=np.float64) + lam * np.asarray(r_b, dtype=np.float64)


class StepRewards(NamedTuple):
    r_f: np.ndarray  # [T]
    r_b: np.ndarray  # [T]
    r_trca: np.ndarray  # [T]
    coverage: np.ndarray  # [T, J]


def trca_rewards(
    judgments: np.ndarray,
    categories: Sequence[str],
    r_evi: float,
    r_inval: float,
    r_exec: float,
    lam: float = DEFAULT_LAMBDA,
    initial_coverage: np.ndarray | None = None,
) -> StepRewards:
    """All of a rollout's step rewards from its judgments ``O[T, J]``.

    Called with one row and the previous coverage it is the online (per-step) update the
    reward wrapper uses, so batch and online rewards come from the same formulas.

    >>> O = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]])   # steps x (evidence, invalidity, execution)
    >>> r = trca_rewards(O, ["evidence", "invalidity", "execution"], r_evi=0.2, r_inval=0.1, r_exec=0.3)
    >>> r.r_f.round(3).tolist(), r.r_b.round(3).tolist(), r.r_trca.round(3).tolist()
    ([0.2, 0.1, 0.3], [0.2, 0.0, 0.3], [0.2, 0.02, 0.3])
    """
    o = np.asarray(judgments, dtype=np.float64)
    if o.ndim != 2 or o.shape[1] != len(categories):
        raise ValueError(f"judgments must be [T, {len(categories)}], got shape {o.shape}")
    w = item_weights(categories, r_evi, r_inval, r_exec)
    cov_mask = coverable_mask(categories)
    r_f = foundational_reward(o, w)
    cov = coverage(o, cov_mask, initial_coverage)
    r_b = breakthrough_reward(o, w, cov_mask, initial_coverage)
    return StepRewards(r_f, r_b, mix(r_f, r_b, lam), cov)


# -- returns and advantages --------------------------------------------------------------------
def discounted_returns(rewards: np.ndarray, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """``R[t] = sum_{k>=t} gamma^(k-t) * rewards[k]`` (shape ``[T]``)."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    r = np.asarray(rewards, dtype=np.float64)
    out = np.empty_like(r)
    acc = 0.0
    for t in range(r.shape[0] - 1, -1, -1):
        acc = r[t] + gamma * acc
        out[t] = acc
    return out


def completion_aware_returns(
    env_rewards: np.ndarray, step_rewards: np.ndarray, gamma: float = DEFAULT_GAMMA
) -> np.ndarray:
    """``R[t] = sum_{k>=t} gamma^(k-t) * (r_env[k] + r_TRCA[k])``."""
    e = np.asarray(env_rewards, dtype=np.float64)
    s = np.asarray(step_rewards, dtype=np.float64)
    if e.shape != s.shape:
        raise ValueError(f"env rewards {e.shape} and step rewards {s.shape} differ in length")
    return discounted_returns(e + s, gamma)


def episode_advantages(outcomes: Sequence[float] | np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """``A_E[i]``: the group-standardized terminal outcome; 0 when all outcomes are equal."""
    return standardize(outcomes, eps)


def context_groups(context_keys: Sequence[Sequence[str | None]]) -> dict[str, list[tuple[int, int]]]:
    """Steps ``(rollout i, step t)`` of the group, keyed by equal (non-empty) context keys."""
    groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, keys in enumerate(context_keys):
        for t, key in enumerate(keys):
            if key:
                groups[key].append((i, t))
    return dict(groups)


def step_advantages(
    returns: Sequence[np.ndarray],
    context_keys: Sequence[Sequence[str | None]],
    eps: float = DEFAULT_EPS,
) -> list[np.ndarray]:
    """``A_S[i, t]``: ``R[i, t]`` standardized within its context group.

    0 for a step whose group has fewer than two members or zero variance."""
    if len(returns) != len(context_keys):
        raise ValueError(f"{len(returns)} return arrays but {len(context_keys)} key lists")
    rets = [np.asarray(r, dtype=np.float64) for r in returns]
    for i, (r, k) in enumerate(zip(rets, context_keys, strict=True)):
        if r.shape[0] != len(k):
            raise ValueError(f"rollout {i}: {r.shape[0]} returns but {len(k)} context keys")
    out = [np.zeros_like(r) for r in rets]
    for members in context_groups(context_keys).values():
        if len(members) < 2:
            continue
        adv = standardize([rets[i][t] for i, t in members], eps)
        for (i, t), a in zip(members, adv, strict=True):
            out[i][t] = a
    return out


def trca_advantages(
    env_rewards: Sequence[np.ndarray],
    step_rewards: Sequence[np.ndarray],
    context_keys: Sequence[Sequence[str | None]],
    outcomes: Sequence[float] | np.ndarray | None = None,
    gamma: float = DEFAULT_GAMMA,
    eps: float = DEFAULT_EPS,
) -> list[np.ndarray]:
    """``A[i, t] = A_E[i] + A_S[i, t]`` for a group of rollouts of one task.

    ``step_rewards`` are the per-step rubric rewards (r_TRCA, or r_B / r_F for the ablations);
    ``outcomes`` default to each rollout's summed env reward (its sparse terminal outcome)."""
    if not (len(env_rewards) == len(step_rewards) == len(context_keys)):
        raise ValueError("env_rewards, step_rewards and context_keys need one entry per rollout")
    if outcomes is None:
        outcomes = [float(np.sum(e)) for e in env_rewards]
    a_e = episode_advantages(outcomes, eps)
    if a_e.size != len(env_rewards):
        raise ValueError(f"{a_e.size} outcomes for {len(env_rewards)} rollouts")
    returns = [completion_aware_returns(e, s, gamma) for e, s in zip(env_rewards, step_rewards, strict=True)]
    a_s = step_advantages(returns, context_keys, eps)
    return [a_e[i] + a_s[i] for i in range(len(returns))]


# -- the trainer's entry point ----------------------------------------------------------------
@dataclass
class RolloutSignals:
    """What group credit needs from one rollout (all arrays have one entry per step).

    ``r_trca`` is the mix the reward wrapper paid (used by "trca" when no lambda is given);
    ``outcome`` defaults to the summed env reward."""

    r_f: np.ndarray
    r_b: np.ndarray
    env_rewards: np.ndarray
    context_keys: list[str]
    r_trca: np.ndarray | None = None
    outcome: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.r_f = np.asarray(self.r_f, dtype=np.float64)
        self.r_b = np.asarray(self.r_b, dtype=np.float64)
        self.env_rewards = np.asarray(self.env_rewards, dtype=np.float64)
        if self.r_trca is not None:
            self.r_trca = np.asarray(self.r_trca, dtype=np.float64)
        n = len(self.context_keys)
        for name in ("r_f", "r_b", "env_rewards", "r_trca"):
            arr = getattr(self, name)
            if arr is not None and arr.shape != (n,):
                raise ValueError(f"RolloutSignals.{name} has shape {arr.shape}, expected ({n},)")

    @property
    def num_steps(self) -> int:
        return len(self.context_keys)


def outcome_of(signals: RolloutSignals) -> float:
    """The rollout's terminal outcome: given, else the sum of its sparse env rewards."""
    return signals.outcome if signals.outcome is not None else float(np.sum(signals.env_rewards))


def trca_group_step_advantages(
    signals: Sequence[RolloutSignals],
    lam: float | None = None,
    gamma: float = DEFAULT_GAMMA,
    eps: float = DEFAULT_EPS,
) -> list[np.ndarray]:
    """``A_E + A_S`` per step for a group of rollouts of one task.

    ``lam`` re-mixes r_F and r_B; ``None`` uses each step's recorded r_TRCA (the wrapper's
    own mix), else lambda = 0.8."""
    if lam is None:
        step = [s.r_trca if s.r_trca is not None else mix(s.r_f, s.r_b, DEFAULT_LAMBDA) for s in signals]
    else:
        step = [mix(s.r_f, s.r_b, lam) for s in signals]
    return trca_advantages(
        [s.env_rewards for s in signals],
        step,
        [s.context_keys for s in signals],
        outcomes=[outcome_of(s) for s in signals],
        gamma=gamma,
        eps=eps,
    )

