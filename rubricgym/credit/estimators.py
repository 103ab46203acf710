"""The advantage estimators, by name: the one place a name is interpreted.

Each ``Estimator`` says which signal it needs, which tokens of a step carry its value and
the parameters it passes to the pure credit functions (``rubricgym.credit.trca``,
``rubricgym.credit.grpo``, ``rubricgym.credit.draco``). Config validation, the trainer and
the docs (docs/trainer.md's table, checked by a test) all read this registry. Stored
rollouts are read through ``rubricgym.records`` (the only reader of reward records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rubricgym.credit.grpo import DEFAULT_EPS, grpo_step_advantages
from rubricgym.credit.trca import DEFAULT_GAMMA, RolloutSignals, outcome_of, trca_group_step_advantages
from rubricgym.records import rollout_signals, trca_gamma

__all__ = ["ESTIMATORS", "Estimator", "Placement", "Signal", "as_signals", "get_estimator", "group_step_advantages"]

Signal = Literal["outcome", "trca", "judge"]
Placement = Literal["action", "response"]


@dataclass(frozen=True)
class Estimator:
    """``signal``: what the rollouts must carry (the engine outcome, a TRCA record per step, or
    a judge). ``placement``: ``"action"`` = the step's value on its action-span tokens only;
    ``"response"`` = on every response token of the step. ``lam`` fixes TRCA's r_F/r_B mix
    (the ablations); ``draco_variant`` selects the judge pipeline. ``ratio_level`` and
    ``loss_aggregation`` are the objective's defaults for this estimator (the trainer's
    ``algorithm.ratio_level`` / ``loss_aggregation`` override them): the TRCA estimators use
    the TRCA paper's action-level ratio and 1/N sum_i 1/T_i sum_t aggregation."""

    name: str
    signal: Signal
    placement: Placement
    description: str
    lam: float | None = None
    draco_variant: str | None = None
    ratio_level: Literal["token", "action"] = "token"
    loss_aggregation: Literal["token_mean", "step_mean", "rollout_mean_step_mean"] = "token_mean"


ESTIMATORS: dict[str, Estimator] = {e.name: e for e in (
    Estimator("grpo", "outcome", "response", "GRPO: the group-standardized outcome on every response token"),
    Estimator("trca", "trca", "action", "TRCA: A_E + A_S (r_TRCA mixed with the library's lambda) on action tokens",
              ratio_level="action", loss_aggregation="rollout_mean_step_mean"),
    Estimator("trca_no_rf", "trca", "action", "TRCA without the foundational reward (lambda = 1)", lam=1.0,
              ratio_level="action", loss_aggregation="rollout_mean_step_mean"),
    Estimator("trca_no_rb", "trca", "action", "TRCA without the breakthrough reward (lambda = 0)", lam=0.0,
              ratio_level="action", loss_aggregation="rollout_mean_step_mean"),
    Estimator("draco", "judge", "response", "DRACO: dynamic rubrics with step credit a_j",
              draco_variant="dynamic/credit"),
    Estimator("draco_static", "judge", "response", "DRACO ablation: static rubric, no step credit (A_i)",
              draco_variant="static/no-credit"),
    Estimator("draco_static_credit", "judge", "response", "DRACO ablation: static rubric with step credit",
              draco_variant="static/credit"),
    Estimator("draco_dynamic", "judge", "response", "DRACO ablation: dynamic rubrics, no step credit",
              draco_variant="dynamic/no-credit"),
)}


def get_estimator(name: str) -> Estimator:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown advantage estimator {name!r}; choose one of {tuple(ESTIMATORS)}") from None


def as_signals(item: Any) -> RolloutSignals:
    """``RolloutSignals`` from signals, a mapping of their fields, or a ``Trajectory`` (its
    transitions' TRCA records, read through ``rubricgym.records``)."""
    if isinstance(item, RolloutSignals):
        return item
    if hasattr(item, "transitions"):
        return rollout_signals(item.transitions, f"trajectory {getattr(item, 'task_id', '?')}")
    if isinstance(item, Mapping):
        return RolloutSignals(**item)
    raise TypeError(f"cannot read rollout signals from {type(item).__name__}")


def group_step_advantages(name: str, rollouts: Sequence[Any], lam: float | None = None,
                          gamma: float | None = None, eps: float = DEFAULT_EPS) -> list[np.ndarray]:
    """Per-step advantages of a group from stored signals, for the estimators that need no
    judge (``grpo``, ``trca*``): ``rollouts`` are ``RolloutSignals``, mappings or trajectories.
    ``gamma`` defaults to the discount the trajectories' TRCA records carry (their library's),
    else 0.95: the trainer's rule.

    >>> won = dict(r_f=[0.1, 0.2], r_b=[0.1, 0.2], env_rewards=[0.0, 1.0], context_keys=["a", "b"])
    >>> lost = dict(r_f=[0.1, -0.1], r_b=[0.1, 0.0], env_rewards=[0.0, 0.0], context_keys=["a", "c"])
    >>> [a.round(2).tolist() for a in group_step_advantages("grpo", [won, lost])]
    [[1.0, 1.0], [-1.0, -1.0]]
    >>> [a.round(2).tolist() for a in group_step_advantages("trca", [won, lost])]
    [[2.0, 1.0], [-2.0, -1.0]]
    """
    est = get_estimator(name)
    signals = [as_signals(r) for r in rollouts]
    if est.signal == "outcome":
        return grpo_step_advantages([outcome_of(s) for s in signals], [s.num_steps for s in signals], eps)
    if est.signal == "trca":
        if gamma is None:
            gamma = next((g for r in rollouts if hasattr(r, "transitions")
                          for g in [trca_gamma(r.transitions)] if g is not None), DEFAULT_GAMMA)
        return trca_group_step_advantages(signals, lam=est.lam if est.lam is not None else lam, gamma=gamma, eps=eps)
    raise ValueError(f"estimator {name!r} needs a judge: use rubricgym.judges.DracoJudge.score_group")
