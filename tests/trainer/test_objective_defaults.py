"""The paper estimators' objective by default (docs/design.md §6, "Objective defaults"): TRCA
and DRACO keep samples whose advantages are all zero, so their tokens count in the aggregation
denominators and the KL as in TRCA's Eq. 22; skipping stays an option."""

from __future__ import annotations

import pytest

from rubricgym.credit.estimators import ESTIMATORS
from rubricgym.trainers.config import AlgorithmSettings
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.update import aggregation_weights, resolved_objective, trainable_samples


def _sample(advantage: float, rollout: int, steps: int) -> StepSample:
    return StepSample(prompt_ids=[1], response_ids=[5, 6], response_text="", reasoning_tokens=None,
                      action_tokens=(0, 2), reward=0.0, env_reward=0.0, token_advantages=[advantage] * 2,
                      loss_mask=[True, True], rollout_index=rollout, rollout_steps=steps)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_the_paper_estimators_keep_zero_advantage_samples_by_default(name):
    resolved = resolved_objective(AlgorithmSettings(advantage=name))
    paper = name.startswith(("trca", "draco"))
    assert resolved.skip_zero_advantage is (not paper)
    assert resolved_objective(AlgorithmSettings(advantage=name, skip_zero_advantage=True)).skip_zero_advantage
    assert not resolved_objective(AlgorithmSettings(advantage=name, skip_zero_advantage=False)).skip_zero_advantage


def test_keeping_the_zero_sample_changes_the_weights_as_eq_22_says():
    """Two rollouts of two steps; one step's advantages are all 0. Eq. 22's weight of a token of
    a trained step is 1/(N T_i n_s) = 1/(2 * 2 * 2) = 1/8; skipping the zero step renormalises
    the other three to 1/6 each (x 4/3, the hand-checked case of issue 32)."""
    samples = [_sample(1.0, 0, 2), _sample(0.0, 0, 2), _sample(-1.0, 1, 2), _sample(-0.5, 1, 2)]
    trca = resolved_objective(AlgorithmSettings(advantage="trca"))
    kept = trainable_samples(samples, bool(trca.skip_zero_advantage))
    assert len(kept) == 4
    assert aggregation_weights(kept, str(trca.loss_aggregation)) == pytest.approx([0.25] * 4)  # per sample: 2 tokens x 1/8
    skipped = trainable_samples(samples, True)
    assert aggregation_weights(skipped, "rollout_mean_step_mean") == pytest.approx([1 / 3] * 3)  # x 4/3
