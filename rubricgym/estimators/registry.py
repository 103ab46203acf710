"""The advantage estimators, by name: what each computes, reads and trains.

An ``Estimator`` is a registry entry: its ``compute`` function (per-step values of one group
from ``GroupInputs`` arrays, calling the pure formulas of ``rubricgym.credit``), the inputs it
needs besides the engine's rewards (``needs``), where its values go (``placement``: the action
span or the whole response) and the objective it was defined with (``Objective``: ratio level,
loss aggregation, zero-advantage rule). ``register_estimator`` adds one; every caller (the own
trainer, TRL, verl, stored trajectories, the report) reaches it through
``rubricgym.estimators.resolve_estimator`` and ``group_step_values``, so a plugin's estimator
goes through the same path as the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np

from rubricgym.credit.baselines import Norm, gigpo_step_advantages, rloo_step_advantages
from rubricgym.credit.grpo import grpo_step_advantages
from rubricgym.credit.placement import Placement
from rubricgym.credit.trca import RolloutSignals, trca_group_step_advantages
from rubricgym.estimators.inputs import GroupInputs, StepParameters

__all__ = ["ESTIMATORS", "Compute", "Estimator", "Need", "Objective", "RatioLevel", "LossAggregation",
           "estimator_names", "get_estimator", "register_estimator"]

Need = Literal["trca", "anchors", "judge"]
"""An input beyond the engine's rewards and context keys: each step's TRCA record (``trca``),
the observation each step acted on (``anchors``: GiGPO's anchor state), a DRACO judge's
verdicts on the group's trajectories (``judge``)."""
RatioLevel = Literal["token", "action"]
LossAggregation = Literal["token_mean", "step_mean", "rollout_mean_step_mean"]
Compute = Callable[[GroupInputs, StepParameters], list[np.ndarray]]
"""An estimator's computation: one group's inputs and the settled parameters in, one array of
per-step values per rollout out (``[T_i]``)."""


@dataclass(frozen=True)
class Objective:
    """The objective an estimator's paper trains with (each overridable in the trainer's
    ``algorithm`` section): ``ratio_level`` per token or per action (TRCA's Eq. 21);
    ``loss_aggregation`` over tokens, steps, or 1/N sum_i 1/T_i sum_t (TRCA's Eq. 22);
    ``skip_zero_advantage``: drop samples whose trained tokens all have advantage 0."""

    ratio_level: RatioLevel = "token"
    loss_aggregation: LossAggregation = "token_mean"
    skip_zero_advantage: bool = True


PAPER_STEP_OBJECTIVE = Objective("action", "rollout_mean_step_mean", skip_zero_advantage=False)
"""TRCA's: the action-level ratio, 1/N sum_i 1/T_i sum_t, and zero-advantage steps kept (they
count in the aggregation and the KL)."""


@dataclass(frozen=True)
class Estimator:
    """One registered estimator. ``lam``: a lambda the estimator fixes (TRCA's ablations; no
    setting overrides it); ``judge_variant``: the DRACO pipeline a ``judge`` estimator runs."""

    name: str
    description: str
    compute: Compute
    needs: frozenset[Need] = frozenset()
    placement: Placement = "response"
    objective: Objective = field(default_factory=Objective)
    lam: float | None = None
    judge_variant: str | None = None
    family: str = ""  # the paper it comes from, for the docs' table ("GRPO", "TRCA", ...)
    episode_term: bool = False  # its value is A_E + A_S, A_E the group-standardized outcome (views split it)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"estimator name {self.name!r} must be letters, digits and underscores")
        if "judge" in self.needs and not self.judge_variant:
            raise ValueError(f"estimator {self.name!r} needs a judge: give its judge_variant")
        if self.lam is not None and not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"estimator {self.name!r}: lambda must be in [0, 1], got {self.lam}")


# ---- the built-in estimators' computations (pure: arrays in, per-step values out) ----------------
def _grpo(inputs: GroupInputs, est: StepParameters) -> list[np.ndarray]:
    return grpo_step_advantages(inputs.outcomes, inputs.lengths, est.eps)


def _rloo(inputs: GroupInputs, est: StepParameters) -> list[np.ndarray]:
    return rloo_step_advantages(inputs.outcomes, inputs.lengths)


def _gigpo(inputs: GroupInputs, est: StepParameters, *, anchor: Literal["observation", "context_key"],
           norm: Norm) -> list[np.ndarray]:
    keys = inputs.require_anchors() if anchor == "observation" else inputs.context_keys
    return gigpo_step_advantages(inputs.env_rewards, keys, outcomes=inputs.outcomes, gamma=est.gamma, norm=norm,
                                 eps=est.eps)


def _trca(inputs: GroupInputs, est: StepParameters) -> list[np.ndarray]:
    trca = inputs.require_trca()
    signals = [RolloutSignals(r_f=f, r_b=b, env_rewards=e, context_keys=list(k), r_trca=paid, outcome=float(o))
               for f, b, paid, e, k, o in zip(trca.r_f, trca.r_b, trca.r_trca, inputs.env_rewards,
                                              inputs.context_keys, inputs.outcomes, strict=True)]
    return trca_group_step_advantages(signals, lam=est.lam, gamma=est.gamma, eps=est.eps)


def _judged(inputs: GroupInputs, est: StepParameters) -> list[np.ndarray]:
    return [np.asarray(v, dtype=np.float64) for v in inputs.require_judged()]


ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(estimator: Estimator, *, replace: bool = False) -> Estimator:
    """Add an estimator to the registry (a plugin's own, say); ``replace`` to redefine a name."""
    if estimator.name in ESTIMATORS and not replace:
        raise ValueError(f"an estimator named {estimator.name!r} is already registered (pass replace=True)")
    ESTIMATORS[estimator.name] = estimator
    return estimator


def get_estimator(name: str) -> Estimator:
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown advantage estimator {name!r}; choose one of {', '.join(ESTIMATORS)}") from None


def estimator_names() -> tuple[str, ...]:
    return tuple(ESTIMATORS)


def _builtins() -> Mapping[str, Estimator]:
    judge = frozenset({"judge"})
    keep_zero = Objective(skip_zero_advantage=False)
    return {e.name: e for e in (
        Estimator("grpo", "GRPO: the group-standardized outcome on every response token", _grpo, family="GRPO"),
        Estimator("rloo", "RLOO: R_i minus the mean of the other rollouts' returns, on every response token", _rloo,
                  family="RLOO"),
        Estimator("gigpo", "GiGPO: A_E + A_S over steps with the same observation before the action (env reward "
                  "only), on every response token", partial(_gigpo, anchor="observation", norm="std"),
                  needs=frozenset({"anchors"}), family="GiGPO", episode_term=True),
        Estimator("gigpo_mean", "GiGPO with mean-centring only (verl-agent's default mode)",
                  partial(_gigpo, anchor="observation", norm="mean"), needs=frozenset({"anchors"}), family="GiGPO"),
        Estimator("gigpo_context", "GiGPO with the benchmark's context key as the anchor state",
                  partial(_gigpo, anchor="context_key", norm="std"), family="GiGPO", episode_term=True),
        Estimator("trca", "TRCA: A_E + A_S (r_TRCA mixed with the library's lambda) on action tokens", _trca,
                  needs=frozenset({"trca"}), placement="action", objective=PAPER_STEP_OBJECTIVE, family="TRCA", episode_term=True),
        Estimator("trca_no_rf", "TRCA without the foundational reward (lambda = 1)", _trca, needs=frozenset({"trca"}),
                  placement="action", objective=PAPER_STEP_OBJECTIVE, lam=1.0, family="TRCA", episode_term=True),
        Estimator("trca_no_rb", "TRCA without the breakthrough reward (lambda = 0)", _trca, needs=frozenset({"trca"}),
                  placement="action", objective=PAPER_STEP_OBJECTIVE, lam=0.0, family="TRCA", episode_term=True),
        Estimator("draco", "DRACO: dynamic rubrics with step credit a_j", _judged, needs=judge,
                  objective=keep_zero, judge_variant="dynamic/credit", family="DRACO"),
        Estimator("draco_static", "DRACO ablation: static rubric, no step credit (A_i)", _judged, needs=judge,
                  objective=keep_zero, judge_variant="static/no-credit", family="DRACO"),
        Estimator("draco_static_credit", "DRACO ablation: static rubric with step credit", _judged, needs=judge,
                  objective=keep_zero, judge_variant="static/credit", family="DRACO"),
        Estimator("draco_dynamic", "DRACO ablation: dynamic rubrics, no step credit", _judged, needs=judge,
                  objective=keep_zero, judge_variant="dynamic/no-credit", family="DRACO"),
    )}


ESTIMATORS.update(_builtins())
