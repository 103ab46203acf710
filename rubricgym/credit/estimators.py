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

from rubricgym.credit.baselines import Norm, gigpo_step_advantages, rloo_step_advantages
from rubricgym.credit.grpo import DEFAULT_EPS, grpo_step_advantages
from rubricgym.credit.trca import DEFAULT_GAMMA, RolloutSignals, outcome_of, trca_group_step_advantages
from rubricgym.records import anchor_observations, rollout_signals, trca_gamma

__all__ = ["ESTIMATORS", "Anchor", "Credit", "Estimator", "Placement", "Signal", "as_signals", "get_estimator",
           "group_step_advantages", "outcome_step_advantages"]

Signal = Literal["outcome", "trca", "judge"]
Placement = Literal["action", "response"]
Credit = Literal["grpo", "rloo", "gigpo", "trca", "draco"]
Anchor = Literal["observation", "context_key"]


@dataclass(frozen=True)
class Estimator:
    """``signal``: what the rollouts must carry (the engine outcome, a TRCA record per step, or
    a judge). ``placement``: ``"action"`` = the step's value on its action-span tokens only;
    ``"response"`` = on every response token of the step. ``lam`` fixes TRCA's r_F/r_B mix
    (the ablations); ``draco_variant`` selects the judge pipeline. ``ratio_level`` and
    ``loss_aggregation`` are the objective's defaults for this estimator (the trainer's
    ``algorithm.ratio_level`` / ``loss_aggregation`` override them): the TRCA estimators use
    the TRCA paper's action-level ratio and 1/N sum_i 1/T_i sum_t aggregation. ``credit``
    names the group-credit formula; ``skip_zero_advantage`` the objective's default for samples
whose trained tokens all have advantage 0 (the TRCA and DRACO estimators keep them: their
tokens count in the aggregation and the KL, as in TRCA's Eq. 22); ``anchor`` and ``norm`` are GiGPO's step grouping (the
    observation before the action, or the benchmark's context key) and normalisation."""

    name: str
    signal: Signal
    placement: Placement
    description: str
    credit: Credit
    lam: float | None = None
    anchor: Anchor = "observation"
    norm: Norm = "std"
    draco_variant: str | None = None
    ratio_level: Literal["token", "action"] = "token"
    loss_aggregation: Literal["token_mean", "step_mean", "rollout_mean_step_mean"] = "token_mean"
    skip_zero_advantage: bool = True


ESTIMATORS: dict[str, Estimator] = {e.name: e for e in (
    Estimator("grpo", "outcome", "response", "GRPO: the group-standardized outcome on every response token", "grpo"),
    Estimator("rloo", "outcome", "response", "RLOO: R_i minus the mean of the other rollouts' returns, on every "
              "response token", "rloo"),
    Estimator("gigpo", "outcome", "response", "GiGPO: A_E + A_S over steps with the same observation before the "
              "action (env reward only), on every response token", "gigpo"),
    Estimator("gigpo_mean", "outcome", "response", "GiGPO with mean-centring only (verl-agent's default mode)",
              "gigpo", norm="mean"),
    Estimator("gigpo_context", "outcome", "response", "GiGPO with the benchmark's context key as the anchor state",
              "gigpo", anchor="context_key"),
    Estimator("trca", "trca", "action", "TRCA: A_E + A_S (r_TRCA mixed with the library's lambda) on action tokens",
              "trca", ratio_level="action", loss_aggregation="rollout_mean_step_mean", skip_zero_advantage=False),
    Estimator("trca_no_rf", "trca", "action", "TRCA without the foundational reward (lambda = 1)", "trca", lam=1.0,
              ratio_level="action", loss_aggregation="rollout_mean_step_mean", skip_zero_advantage=False),
    Estimator("trca_no_rb", "trca", "action", "TRCA without the breakthrough reward (lambda = 0)", "trca", lam=0.0,
              ratio_level="action", loss_aggregation="rollout_mean_step_mean", skip_zero_advantage=False),
    Estimator("draco", "judge", "response", "DRACO: dynamic rubrics with step credit a_j", "draco",
              draco_variant="dynamic/credit", skip_zero_advantage=False),
    Estimator("draco_static", "judge", "response", "DRACO ablation: static rubric, no step credit (A_i)", "draco",
              draco_variant="static/no-credit", skip_zero_advantage=False),
    Estimator("draco_static_credit", "judge", "response", "DRACO ablation: static rubric with step credit", "draco",
              draco_variant="static/credit", skip_zero_advantage=False),
    Estimator("draco_dynamic", "judge", "response", "DRACO ablation: dynamic rubrics, no step credit", "draco",
              draco_variant="dynamic/no-credit", skip_zero_advantage=False),
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


def _outcome_inputs(rollouts: Sequence[Any]) -> tuple[list[list[float]], list[float], list[list[str]] | None,
                                                        list[list[str]]]:
    """(env rewards per step, outcome, anchor observations or None, context keys) per rollout,
    from trajectories (no rubric record needed) or from signals."""
    if all(hasattr(r, "transitions") for r in rollouts):
        rewards = [[float(t.env_reward) for t in r.transitions] for r in rollouts]
        return (rewards, [sum(r) for r in rewards], [anchor_observations(r) for r in rollouts],
                [[t.context_key for t in r.transitions] for r in rollouts])
    signals = [as_signals(r) for r in rollouts]
    return ([s.env_rewards.tolist() for s in signals], [outcome_of(s) for s in signals], None,
            [list(s.context_keys) for s in signals])


def outcome_step_advantages(est: Estimator, env_rewards: Sequence[Sequence[float]], outcomes: Sequence[float],
                            anchors: Sequence[Sequence[str]] | None = None, context_keys: Sequence[Sequence[str]] | None = None,
                            gamma: float = DEFAULT_GAMMA, eps: float = DEFAULT_EPS) -> list[np.ndarray]:
    """Per-step advantages of the estimators that read only the engine's rewards (``grpo``,
    ``rloo``, ``gigpo*``): the one dispatch the trainer and ``group_step_advantages`` share.
    ``anchors``: the observation before each step (``gigpo``); ``context_keys``: the
    benchmark's keys (``gigpo_context``)."""
    lengths = [len(r) for r in env_rewards]
    if est.credit == "grpo":
        return grpo_step_advantages(outcomes, lengths, eps)
    if est.credit == "rloo":
        return rloo_step_advantages(outcomes, lengths)
    if est.credit == "gigpo":
        keys = anchors if est.anchor == "observation" else context_keys
        if keys is None:
            raise ValueError(f"estimator {est.name!r} needs each step's {est.anchor.replace('_', ' ')}: pass "
                             "trajectories (or Rollouts with their trajectory)")
        return gigpo_step_advantages(env_rewards, keys, outcomes=outcomes, gamma=gamma, norm=est.norm, eps=eps)
    raise ValueError(f"estimator {est.name!r} is not an outcome estimator")


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
    gamma_or_default = DEFAULT_GAMMA if gamma is None else gamma
    if est.signal == "outcome":
        env_rewards, outcomes, anchors, keys = _outcome_inputs(rollouts)
        return outcome_step_advantages(est, env_rewards, outcomes, anchors=anchors, context_keys=keys,
                                       gamma=gamma_or_default, eps=eps)
    signals = [as_signals(r) for r in rollouts]
    if est.signal == "trca":
        if gamma is None:
            gamma = next((g for r in rollouts if hasattr(r, "transitions")
                          for g in [trca_gamma(r.transitions)] if g is not None), DEFAULT_GAMMA)
        return trca_group_step_advantages(signals, lam=est.lam if est.lam is not None else lam, gamma=gamma, eps=eps)
    raise ValueError(f"estimator {name!r} needs a judge: use rubricgym.judges.DracoJudge.score_group")
