"""Advantage estimators: the registry, one resolution per run, one computation per group.

``resolve_estimator(name, ...)`` settles an estimator's settings once (``ResolvedEstimator``);
``group_step_values(resolved, group)`` turns a group of ``CreditRollout`` into per-step values
with the pure formulas of ``rubricgym.credit``; ``rubricgym.credit.token_advantages`` places
them on tokens. The own trainer, TRL, the report and stored trajectories all go this way
(docs/own_loop.md shows it in a plain loop); ``register_estimator`` adds one of your own.
"""

from rubricgym.estimators.group import (CreditRollout, CreditStep, GroupCredit, JudgeForCredit, TrajectoryStep,
                                        group_inputs, group_step_advantages, group_step_values, outcome_rewards,
                                        trajectory_rollout)
from rubricgym.estimators.inputs import GroupInputs, MissingCreditInput, StepParameters, TRCAArrays
from rubricgym.estimators.registry import (ESTIMATORS, Estimator, Need, Objective, estimator_names, get_estimator,
                                           register_estimator)
from rubricgym.estimators.resolve import Chosen, OutcomeRule, ResolvedEstimator, SettingConflict, choose, resolve_estimator

__all__ = [
    "ESTIMATORS", "Chosen", "CreditRollout", "CreditStep", "Estimator", "GroupCredit", "GroupInputs", "JudgeForCredit",
    "MissingCreditInput", "Need", "Objective", "OutcomeRule", "ResolvedEstimator", "SettingConflict", "StepParameters", "TRCAArrays",
    "TrajectoryStep", "choose", "estimator_names", "get_estimator", "group_inputs", "group_step_advantages",
    "group_step_values", "outcome_rewards", "register_estimator", "resolve_estimator", "trajectory_rollout",
]
