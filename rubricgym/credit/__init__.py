"""Credit assignment: every formula as a pure numpy function with documented shapes.

Every TRCA formula (docs/design.md §4) lives in ``rubricgym.credit.trca``; DRACO step credit
(§5) in ``rubricgym.credit.draco``; plain GRPO and the one standardization rule shared by
every estimator in ``rubricgym.credit.grpo``; RLOO and GiGPO in ``rubricgym.credit.baselines``;
``rubricgym.credit.placement`` puts per-step values on tokens (``token_advantages``). Arrays
in, arrays out: nothing here reads records, trajectories, files, models or envs (an
architecture test keeps it so). Estimators by name, and the one path from a group of rollouts
to these functions, are ``rubricgym.estimators``.
"""

from rubricgym.credit import baselines, draco, grpo, trca
from rubricgym.credit.baselines import gigpo_step_advantages, rloo_advantages, rloo_step_advantages
from rubricgym.credit.draco import *  # noqa: F403
from rubricgym.credit.grpo import DEFAULT_EPS, grpo_advantages, grpo_step_advantages, standardize
from rubricgym.credit.placement import Placement, StepTokens, token_advantages
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
    "baselines",
    "gigpo_step_advantages",
    "rloo_advantages",
    "rloo_step_advantages",
    *draco.__all__,
    "DEFAULT_EPS",
    "grpo_advantages",
    "grpo_step_advantages",
    "standardize",
    "Placement",
    "StepTokens",
    "token_advantages",
    "CATEGORIES",
    "COVERABLE_CATEGORIES",
    "DEFAULT_GAMMA",
    "DEFAULT_LAMBDA",
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
