"""Per-token advantages and loss masks for every step sample, by estimator.

The estimator names are interpreted in ``rubricgym.credit.estimators`` (which signal, which
tokens, which parameters); the formulas live in ``rubricgym.credit`` (GRPO, TRCA) and
``rubricgym.judges`` / ``rubricgym.credit.draco`` (DRACO). This module only feeds each group's
signals to them and places the per-step values on tokens:

* ``grpo``: the group-standardized outcome on every response token; ``rloo`` and ``gigpo*``
  (the papers' baselines) the same way, from the engine's rewards only.
* ``trca`` (and the ablations ``trca_no_rf``, ``trca_no_rb``): ``A_E + A_S`` on the tokens of
  the step's ``<action>`` span only; reasoning, prompt, observation and padding are masked.
  A response with no parsed action has no action tokens, so it carries no gradient.
* ``draco`` (dynamic rubric + step credit) and its ablations ``draco_static``
  (static, no credit), ``draco_static_credit``, ``draco_dynamic`` (dynamic, no credit): the
  step credit ``a_j`` on every token of step j's response; tokens outside every step (the
  prompt, observations, padding) get 0.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from rubricgym.credit.estimators import ESTIMATORS, Estimator, get_estimator, outcome_step_advantages
from rubricgym.credit.placement import StepTokens, token_advantages
from rubricgym.credit.trca import DEFAULT_GAMMA, RolloutSignals, trca_group_step_advantages
from rubricgym.records import MissingRecord, anchor_observations, rollout_signals, trca_gamma
from rubricgym.trainers.rollout import Rollout

ESTIMATOR_NAMES = tuple(ESTIMATORS)
log = logging.getLogger(__name__)


class MissingRewardSignal(RuntimeError):
    """The estimator needs a signal the env did not provide (e.g. no TRCA reward wrapper)."""


def outcome_group(group: Sequence[Rollout], est: Estimator, gamma: float | None, eps: float) -> list[np.ndarray]:
    """``grpo``, ``rloo``, ``gigpo*``: the engine's rewards only (GiGPO's anchors are the
    observations each step acted on, read from the rollout's trajectory)."""
    anchors = None
    if all(r.trajectory is not None and len(r.trajectory.transitions) == len(r.steps) for r in group):
        anchors = [anchor_observations(r.trajectory) for r in group]
    return outcome_step_advantages(est, [[s.env_reward for s in r.steps] for r in group],
                                   [r.env_return for r in group], anchors=anchors,
                                   context_keys=[[s.context_key for s in r.steps] for r in group],
                                   gamma=DEFAULT_GAMMA if gamma is None else gamma, eps=eps)


def trca_signals(rollout: Rollout) -> RolloutSignals:
    try:
        return rollout_signals(rollout.steps, f"task {rollout.task_id}:", outcome=rollout.env_return)
    except MissingRecord as exc:
        raise MissingRewardSignal(
            f"{exc}; the 'trca' estimators need the TRCA reward wrapper "
            "(gym.make(..., reward='default') with an operator library)"
        ) from exc


def resolve_gamma(configured: float | None, group: Sequence[Rollout]) -> float:
    """One source for gamma: the library's, unless the config sets one (then a warning names
    both when they differ; never a silently ignored field)."""
    from_library = trca_gamma(s for rollout in group for s in rollout.steps)
    if configured is None:
        return from_library if from_library is not None else DEFAULT_GAMMA
    if from_library is not None and abs(from_library - configured) > 1e-12:
        log.warning("algorithm.gamma=%s overrides the operator library's gamma=%s", configured, from_library)
    return configured


def trca_group(group: Sequence[Rollout], lam: float | None, gamma: float | None, eps: float) -> list[np.ndarray]:
    return trca_group_step_advantages([trca_signals(r) for r in group], lam=lam, gamma=resolve_gamma(gamma, group),
                                      eps=eps)


def draco_group(group: Sequence[Rollout], name: str, variant: str, judge: Any, iteration: int) -> list[np.ndarray]:
    """Per-step a_j from the judge's group result; tokens of a step = its response tokens."""
    if judge is None:
        raise MissingRewardSignal(
            f"advantage '{name}' needs a DRACO judge: configure judge.config / judge.options "
            "(an OpenAI-compatible endpoint) or pass judge= to the Trainer"
        )
    trajectories = [r.trajectory for r in group]
    if any(t is None for t in trajectories):
        raise MissingRewardSignal("DRACO needs each rollout's trajectory (env.unwrapped.trajectory)")
    values, records = judge.group_step_credit(trajectories, [[len(s.response_ids) for s in r.steps] for r in group],
                                              variant, training_step=iteration)
    for rollout, record in zip(group, records, strict=True):
        rollout.judge = record  # saved with the trajectory: the verdicts behind a_j
    return values


def assign_advantages(groups: Sequence[Sequence[Rollout]], estimator: str, *, gamma: float | None = None,
                      lam: float | None = None, eps: float = 1e-6, judge: Any = None,
                      iteration: int = 0) -> None:
    """Fill ``token_advantages`` and ``loss_mask`` of every step of every rollout."""
    est = get_estimator(estimator)
    for group in groups:
        if est.signal == "outcome":
            per_step = outcome_group(group, est, gamma, eps)
        elif est.signal == "trca":
            per_step = trca_group(group, est.lam if est.lam is not None else lam, gamma, eps)
        else:
            per_step = draco_group(group, est.name, str(est.draco_variant), judge, iteration)
        for rollout, values in zip(group, per_step, strict=True):
            if len(values) != len(rollout.steps):
                raise ValueError(f"{len(values)} advantages for {len(rollout.steps)} steps")
            for step, value in zip(rollout.steps, values, strict=True):
                n = len(step.response_ids)
                tokens = StepTokens(response=(0, n), action=step.action_tokens, reasoning=step.reasoning_tokens)
                advantages, mask = token_advantages(est, [float(value)], [tokens], n)
                step.token_advantages, step.loss_mask = advantages.tolist(), mask.tolist()
