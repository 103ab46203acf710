"""The advantage estimators, by name: the one place a name is interpreted.

Each ``Estimator`` says which signal it needs, which tokens of a step carry its value and
the parameters it passes to the pure credit functions (``rubricgym.credit.trca``,
``rubricgym.credit.grpo``, ``rubricgym.credit.draco``). Config validation, the trainer and
the docs (docs/trainer.md's table, checked by a test) all read this registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rubricgym.credit.grpo import DEFAULT_EPS, grpo_step_advantages

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


def group_step_advantages(name: str, rollouts: Sequence[Any], lam: float | None = None, gamma: float = 0.95,
                          eps: float = DEFAULT_EPS) -> list[np.ndarray]:
    """Per-step advantages of a group from stored signals, for the estimators that need no
    judge (``grpo``, ``trca*``): ``rollouts`` are ``RolloutSignals``, mappings or trajectories."""
    from rubricgym.credit.trca import as_signals, outcome_of, trca_group_step_advantages

    est = get_estimator(name)
    signals = [as_signals(r) for r in rollouts]
    if est.signal == "outcome":
        return grpo_step_advantages([outcome_of(s) for s in signals], [s.num_steps for s in signals], eps)
    if est.signal == "trca":
        return trca_group_step_advantages(signals, lam=est.lam if est.lam is not None else lam, gamma=gamma, eps=eps)
    raise ValueError(f"estimator {name!r} needs a judge: use rubricgym.judges.DracoJudge.score_group")
