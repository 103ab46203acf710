"""Per-token advantages and loss masks for the trainer's step samples.

Adaptation and placement only: each group of ``Rollout`` becomes a group of
``rubricgym.estimators.CreditRollout`` (a ``StepSample`` is a ``CreditStep``), the one
computation (``group_step_values``) gives each step its value, and
``rubricgym.credit.token_advantages`` places it on the step's tokens by the estimator's rule:
its action span (TRCA: reasoning, prompt, observation and padding masked; a response with no
parsed action has no action tokens, so it carries no gradient) or its whole response (GRPO,
RLOO, GiGPO, DRACO). A DRACO estimator's verdicts are kept on each rollout (``Rollout.judge``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rubricgym.credit.placement import StepTokens, token_advantages
from rubricgym.estimators import CreditRollout, JudgeForCredit, ResolvedEstimator, group_step_values
from rubricgym.trainers.rollout import Rollout

__all__ = ["assign_advantages", "credit_rollout"]


def credit_rollout(rollout: Rollout) -> CreditRollout:
    return CreditRollout(rollout.steps, rollout.success, rollout.trajectory, f"task {rollout.task_id}")


def assign_advantages(groups: Sequence[Sequence[Rollout]], estimator: ResolvedEstimator, *,
                      judge: JudgeForCredit | None = None, iteration: int = 0) -> None:
    """Fill ``token_advantages`` and ``loss_mask`` of every step of every rollout."""
    for group in groups:
        credit = group_step_values(estimator, [credit_rollout(r) for r in group], judge=judge,
                                   training_step=iteration)
        for k, (rollout, per_step) in enumerate(zip(group, credit.values, strict=True)):
            if credit.verdicts is not None:
                rollout.judge = credit.verdicts[k]  # saved with the trajectory: the verdicts behind a_j
            for step, value in zip(rollout.steps, per_step, strict=True):
                n = len(step.response_ids)
                tokens = StepTokens(response=(0, n), action=step.action_tokens, reasoning=step.reasoning_tokens)
                advantages, mask = token_advantages(estimator.placement, [float(value)], [tokens], n)
                step.token_advantages, step.loss_mask = advantages.tolist(), mask.tolist()
