"""Credit assignment: every formula as a pure numpy function with documented shapes.

Every TRCA formula (docs/design.md §4) lives in ``rubricgym.credit.trca``; DRACO step credit
(§5) in ``rubricgym.credit.draco``; plain GRPO and the one standardization rule shared by
every estimator in ``rubricgym.credit.grpo`` — no I/O, models or envs in these three.
``rubricgym.credit.estimators`` interprets estimator names and reads stored rollouts (their
reward records, through ``rubricgym.records``); ``rubricgym.credit.placement`` puts per-step
values on tokens (``token_advantages``). Other trainers can call all of these
(docs/own_loop.md).
"""

from rubricgym.credit import draco, estimators, grpo, trca
from rubricgym.credit.estimators import ESTIMATORS, Estimator, as_signals, get_estimator, group_step_advantages
from rubricgym.credit.draco import *  # noqa: F403
from rubricgym.credit.grpo import DEFAULT_EPS, grpo_advantages, grpo_step_advantages, standardize
from rubricgym.credit.placement import StepTokens, token_advantages
from rubricgym.credit.trca import (
    CATEGORIES,
    COVERABLE_CATEGORIES,
    DEFAULT_GAMMA,
    DEFAULT_LAMBDA,
    EVIDENCE,
    EXECUTION,
    INVALIDITY,
    RolloutSignals,
    StepRewards,
    breakthrough_reward,
    completion_aware_returns,
    context_groups,
    coverable_mask,
    coverage,
    discounted_returns,
    episode_advantages,
    foundational_reward,
    item_weights,
    mix,
    potential,
    step_advantages,
    trca_advantages,
    trca_group_step_advantages,
    trca_rewards,
)

__all__ = [
    "trca",
    "draco",
    "grpo",
    "estimators",
    "Estimator",
    "as_signals",
    "get_estimator",
    "group_step_advantages",
    *draco.__all__,
    "DEFAULT_EPS",
    "grpo_advantages",
    "grpo_step_advantages",
    "standardize",
    "StepTokens",
    "token_advantages",
    "CATEGORIES",
    "COVERABLE_CATEGORIES",
    "DEFAULT_GAMMA",
    "DEFAULT_LAMBDA",
    "ESTIMATORS",
    "EVIDENCE",
    "EXECUTION",
    "INVALIDITY",
    "RolloutSignals",
    "StepRewards",
    "breakthrough_reward",
    "completion_aware_returns",
    "context_groups",
    "coverable_mask",
    "coverage",
    "discounted_returns",
    "episode_advantages",
    "foundational_reward",
    "item_weights",
    "mix",
    "potential",
    "step_advantages",
    "trca_advantages",
    "trca_group_step_advantages",
    "trca_rewards",
]
