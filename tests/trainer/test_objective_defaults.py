"""The paper estimators' objective by default (docs/design.md §6, "Objective defaults"): TRCA
and DRACO keep samples whose advantages are all zero, so their tokens count in the aggregation
denominators and the KL as in TRCA's Eq. 22; skipping stays an option. Steps with no trained
token (a response with no parsed action, under action placement) count in the step-defined
normalisers too, with no term of their own (issue 49, item 1)."""

from __future__ import annotations

import pytest
import torch

from rubricgym.estimators import ESTIMATORS, resolve_estimator
from rubricgym.trainers.config import AlgorithmSettings, TrainConfig
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.update import aggregation_weights, counted_samples, has_trained_tokens, ppo_update
from trainer.tiny_lora import lora_tiny


def _sample(advantage: float, rollout: int, steps: int, parsed: bool = True) -> StepSample:
    return StepSample(prompt_ids=[1, 7], response_ids=[5, 6], response_text="", reasoning_tokens=None,
                      action_tokens=(0, 2) if parsed else None, reward=0.0, env_reward=0.0,
                      token_advantages=[advantage if parsed else 0.0] * 2, loss_mask=[parsed, parsed],
                      rollout_index=rollout, rollout_steps=steps)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_the_paper_estimators_keep_zero_advantage_samples_by_default(name):
    resolved = TrainConfig(algorithm=AlgorithmSettings(advantage=name)).estimator
    paper = name.startswith(("trca", "draco"))
    assert resolved.skip_zero_advantage is (not paper)
    assert resolve_estimator(name, skip_zero_advantage=True).skip_zero_advantage
    assert not resolve_estimator(name, skip_zero_advantage=False).skip_zero_advantage


def test_keeping_the_zero_sample_changes_the_weights_as_eq_22_says():
    """Two rollouts of two steps; one step's advantages are all 0. Eq. 22's weight of a token of
    a trained step is 1/(N T_i n_s) = 1/(2 * 2 * 2) = 1/8; skipping the zero step renormalises
    the other three to 1/6 each (x 4/3, the hand-checked case of issue 32)."""
    samples = [_sample(1.0, 0, 2), _sample(0.0, 0, 2), _sample(-1.0, 1, 2), _sample(-0.5, 1, 2)]
    trca = resolve_estimator("trca")
    kept = counted_samples(samples, trca.skip_zero_advantage)
    assert len(kept) == 4
    assert aggregation_weights(kept, trca.loss_aggregation) == pytest.approx([0.25] * 4)  # per sample: 2 tokens x 1/8
    skipped = counted_samples(samples, True)
    assert aggregation_weights(skipped, "rollout_mean_step_mean") == pytest.approx([1 / 3] * 3)  # x 4/3


def test_an_unparsed_step_counts_in_the_step_normalisers_without_a_term():
    """Hand-computed: rollout 0 has steps (parsed, unparsed), rollout 1 two parsed steps.
    1/N sum_i 1/T_i sum_t with N = 2, T = 2: every step weighs 1/4, the unparsed one included;
    it has no trained token, so the trained steps' weights sum to 3/4, not 1. step_mean: 1/4
    each too (S = 4). token_mean: the unparsed step has no token to count: 2 tokens of 6 = 1/3."""
    samples = [_sample(1.0, 0, 2), _sample(0.0, 0, 2, parsed=False), _sample(-1.0, 1, 2), _sample(0.5, 1, 2)]
    for skip in (False, True):  # the zero-advantage rule never drops a step that has no trained token
        assert len(counted_samples(samples, skip)) == 4
    assert not has_trained_tokens(samples[1])
    assert aggregation_weights(samples, "rollout_mean_step_mean") == pytest.approx([0.25] * 4)
    assert aggregation_weights(samples, "step_mean") == pytest.approx([0.25] * 4)
    assert aggregation_weights(samples, "token_mean") == pytest.approx([1 / 3, 0.0, 1 / 3, 1 / 3])


@pytest.mark.parametrize(("aggregation", "scale"), [("rollout_mean_step_mean", 0.75), ("step_mean", 0.75),
                                                    ("token_mean", 1.0)])
def test_the_update_scales_by_the_unparsed_share(aggregation, scale):
    """Through ``ppo_update``: one SGD step (ratio 1, no KL or entropy, no clipping of the
    gradient) with the unparsed step present moves every LoRA weight by ``scale`` times the step
    without it: 3/4 for the step-defined aggregations (the paper's normaliser counts it), 1 for
    token_mean (it has no token)."""
    deltas = []
    for with_unparsed in (True, False):
        model, tok = lora_tiny(seed=3)
        trained = [p for p in model.parameters() if p.requires_grad]
        before = torch.cat([p.detach().flatten().clone() for p in trained])
        samples = [_sample(1.0, 0, 2), _sample(-1.0, 1, 2), _sample(0.5, 1, 2)]
        if with_unparsed:
            samples.insert(1, _sample(0.0, 0, 2, parsed=False))
        settings = AlgorithmSettings(kl_coef=0.0, entropy_coef=0.0, max_grad_norm=1e9, micro_batch_size=2)
        objective = resolve_estimator("trca", loss_aggregation=aggregation).objective
        stats = ppo_update(model, torch.optim.SGD(trained, lr=1.0), None, samples, settings, objective,
                           pad_id=tok.pad_token_id)
        assert stats["trained_samples"] == 3
        deltas.append(torch.cat([p.detach().flatten() for p in trained]) - before)
    assert deltas[1].abs().max() > 0
    torch.testing.assert_close(deltas[0], scale * deltas[1], atol=1e-7, rtol=1e-5)
