"""What an estimator's computation reads: one group's inputs as arrays, and its parameters.

Data only (no records, no trajectories): ``rubricgym.estimators.group`` fills these from a
group of rollouts; each registered estimator's ``compute(inputs, parameters)`` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GroupInputs", "MissingCreditInput", "StepParameters", "TRCAArrays"]


class MissingCreditInput(ValueError):
    """A group lacks what its estimator needs (TRCA records, anchor observations, a judge)."""


@dataclass(frozen=True)
class StepParameters:
    """The settled parameters a computation uses: the discount ``gamma``, TRCA's ``lam`` (None:
    the r_TRCA the reward paid) and the standardization's ``eps``."""

    gamma: float
    lam: float | None
    eps: float


@dataclass(frozen=True)
class TRCAArrays:
    """The TRCA records of a group, per rollout (each ``[T_i]``), and the gamma and lambda the
    records carry (the library's; None when no record says)."""

    r_f: tuple[np.ndarray, ...]
    r_b: tuple[np.ndarray, ...]
    r_trca: tuple[np.ndarray, ...]
    gamma: float | None
    lam: float | None


@dataclass(frozen=True)
class GroupInputs:
    """Everything an estimator's computation may read for one group of G rollouts (ragged:
    rollout i has T_i steps). ``env_rewards[i]`` ``[T_i]`` and ``outcomes`` ``[G]`` follow the
    resolved outcome rule; ``anchors``, ``trca`` and ``judged`` are present when the estimator
    needs them."""

    env_rewards: tuple[np.ndarray, ...]
    outcomes: np.ndarray
    context_keys: tuple[tuple[str, ...], ...]
    anchors: tuple[tuple[str, ...], ...] | None = None
    trca: TRCAArrays | None = None
    judged: tuple[np.ndarray, ...] | None = None

    @property
    def lengths(self) -> list[int]:
        return [int(r.shape[0]) for r in self.env_rewards]

    def require_anchors(self) -> tuple[tuple[str, ...], ...]:
        if self.anchors is None:
            raise MissingCreditInput("this estimator needs each step's observation (its anchor); the group's steps "
                                     "carry none")
        return self.anchors

    def require_trca(self) -> TRCAArrays:
        if self.trca is None:
            raise MissingCreditInput("this estimator needs each step's TRCA record; the group carries none")
        return self.trca

    def require_judged(self) -> tuple[np.ndarray, ...]:
        if self.judged is None:
            raise MissingCreditInput("this estimator needs a judge's verdicts; none were given")
        return self.judged


