"""The loss function and the update step: hand-computed values, KL at the start, clipping,
gradient accumulation, and log-probs that match what generation sampled."""

from __future__ import annotations

import math

import pytest
import torch

from rubricgym.estimators import resolve_estimator
from rubricgym.models import build_tiny_model
from rubricgym.trainers.config import AlgorithmSettings, TrainConfig
from rubricgym.trainers.loss import entropy_from_logits, policy_loss
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.update import collate, ppo_update, response_logprobs, step_aggregation_base
from trainer.tiny_lora import lora_tiny

GRPO = resolve_estimator("grpo").objective

KW = dict(clip_low=0.2, clip_high=0.28, kl_coef=0.012, entropy_coef=0.001)


def _toy_batch():
    """Two steps, two response tokens each; the second step's last token is padding."""
    t = lambda *rows: torch.tensor(rows, dtype=torch.float32)  # noqa: E731
    return dict(
        logp=t([-1.0, -2.0], [-0.5, 0.0]),
        old_logp=t([-1.0, -2.5], [-0.1, 0.0]),
        ref_logp=t([-1.2, -2.0], [-0.5, 0.0]),
        advantages=t([1.0, 1.0], [-2.0, 0.0]),
        mask=torch.tensor([[True, True], [True, False]]),
        entropy=t([0.5, 0.7], [0.3, 9.0]),
    )


def test_loss_equals_hand_computed_value():
    terms = policy_loss(**_toy_batch(), **KW, num_tokens=3)
    # token (1,1): ratio 1            -> pg = -1
    # token (1,2): ratio e^0.5 = 1.65 -> clipped at 1.28, pg = -1.28
    # token (2,1): ratio e^-0.4 = .67 -> A<0, clipped at 0.8, pg = +2 * 0.8 = 1.6
    pg = -1.0 - 1.28 + 1.6
    kl = math.exp(-0.2) + 0.2 - 1.0  # k3 at token (1,1); the others have ref == logp
    entropy = 0.5 + 0.7 + 0.3  # the padded token (entropy 9) is masked
    expected = (pg + 0.012 * kl - 0.001 * entropy) / 3
    assert terms.loss.item() == pytest.approx(expected, abs=1e-6)
    assert terms.clipped.item() == 2 and terms.tokens.item() == 3
    assert terms.kl.item() == pytest.approx(kl, abs=1e-7)


def test_clipped_tokens_carry_no_policy_gradient():
    batch = _toy_batch()
    logp = batch.pop("logp").clone().requires_grad_(True)
    terms = policy_loss(logp, **batch, clip_low=0.2, clip_high=0.28, kl_coef=0.0, entropy_coef=0.0, num_tokens=3)
    terms.loss.backward()
    assert logp.grad[0, 0].item() != 0.0  # inside the band
    assert logp.grad[0, 1].item() == 0.0  # ratio above 1 + clip_high with A > 0
    assert logp.grad[1, 0].item() == 0.0  # ratio below 1 - clip_low with A < 0
    assert logp.grad[1, 1].item() == 0.0  # padding


def test_asymmetric_band_and_no_clipping_inside_it():
    ones = torch.ones(1, 3)
    logp = torch.log(torch.tensor([[1.25, 0.82, 1.30]]))  # ratios vs old = 0
    terms = policy_loss(logp, torch.zeros(1, 3), None, ones, ones.bool(), None, clip_low=0.2, clip_high=0.28,
                        kl_coef=0.0, entropy_coef=0.0, num_tokens=3)
    assert terms.clipped.item() == 1  # only 1.30 > 1.28 clips for A > 0


def test_entropy_from_logits_matches_definition():
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    p = torch.softmax(logits, -1)
    assert entropy_from_logits(logits).item() == pytest.approx(-(p * p.log()).sum().item(), abs=1e-6)


def _samples(tok, n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(n):
        p = torch.randint(3, 250, (int(torch.randint(4, 12, (1,), generator=g)),), generator=g).tolist()
        r = torch.randint(3, 250, (int(torch.randint(2, 7, (1,), generator=g)),), generator=g).tolist()
        adv = float(torch.randn(1, generator=g))
        out.append(StepSample(prompt_ids=p, response_ids=r, response_text="", reasoning_tokens=None,
                              action_tokens=None, reward=0.0, env_reward=0.0,
                              token_advantages=[adv] * len(r), loss_mask=[True] * len(r)))
    return out


def test_kl_is_zero_at_the_first_update():
    model, tok = lora_tiny()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    settings = AlgorithmSettings(micro_batch_size=4)
    stats = ppo_update(model, opt, None, _samples(tok), settings, GRPO, pad_id=tok.pad_token_id)
    assert stats["kl"] == 0.0  # a fresh LoRA adapter is the identity: policy == base
    assert stats["ratio"] == pytest.approx(1.0)
    stats2 = ppo_update(model, opt, None, _samples(tok), settings, GRPO, pad_id=tok.pad_token_id)
    assert stats2["kl"] > 0.0  # after one step the policy has moved away from the base


def test_clipping_engages_when_several_steps_move_the_ratio():
    model, tok = lora_tiny()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.2)
    settings = AlgorithmSettings(micro_batch_size=8, epochs=4, minibatches=2, kl_coef=0.0)
    stats = ppo_update(model, opt, None, _samples(tok, n=8), settings, GRPO, pad_id=tok.pad_token_id,
                       generator=torch.Generator().manual_seed(0))
    assert stats["optimizer_steps"] == 8
    assert stats["clip_frac"] > 0.0


def test_gradient_accumulation_matches_one_big_batch():
    results = []
    for size in (1, 3, 16):
        model, tok = lora_tiny(seed=5)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
        ppo_update(model, opt, None, _samples(tok, n=7, seed=2), AlgorithmSettings(micro_batch_size=size,
                   max_grad_norm=1e9), GRPO, pad_id=tok.pad_token_id)
        results.append(torch.cat([p.detach().flatten() for p in model.parameters() if p.requires_grad]))
    assert torch.allclose(results[0], results[1], atol=1e-6)
    assert torch.allclose(results[0], results[2], atol=1e-6)


def test_training_logprobs_match_what_generation_sampled():
    """Left-padded generation and the update's [pad|prompt|response|pad] layout must score
    the sampled tokens identically (position ids follow the attention mask in both)."""
    model, tok = build_tiny_model(3)
    prompts = [[10, 11, 12], [20, 21, 22, 23, 24, 25, 26], [30, 31]]
    width = max(map(len, prompts))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    att = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=att, do_sample=True, max_new_tokens=6, min_new_tokens=6,
                             output_logits=True, return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
    gen = out.sequences[:, width:]
    gen_logp = torch.stack([torch.log_softmax(logits.float(), -1) for logits in out.logits], 1).gather(-1, gen.unsqueeze(-1)).squeeze(-1)
    samples = [StepSample(prompt_ids=p, response_ids=gen[i].tolist(), response_text="", reasoning_tokens=None,
                          action_tokens=None, reward=0.0, env_reward=0.0) for i, p in enumerate(prompts)]
    with torch.no_grad():
        logp, _ = response_logprobs(model, collate(samples, tok.pad_token_id))
    assert torch.allclose(logp, gen_logp, atol=1e-4)


# -- the objective's options: ratio level x aggregation, against hand-computed loss and gradient --------
def _objective_case():
    """Two rollouts: rollout 0 has two steps (T=2), rollout 1 one step (T=1). Step rows:
    s0 (rollout 0, 2 tokens, A=+1), s1 (rollout 0, 1 token, A=-1), s2 (rollout 1, 2 tokens, A=+0.5)."""
    t = lambda *rows: torch.tensor(rows, dtype=torch.float64)  # noqa: E731
    return dict(
        logp=t([-1.0, -0.5], [-0.7, 0.0], [-0.2, -0.3]),
        old_logp=t([-1.1, -0.5], [-0.6, 0.0], [-0.2, -0.4]),
        advantages=t([1.0, 1.0], [-1.0, 0.0], [0.5, 0.5]),
        mask=torch.tensor([[True, True], [True, False], [True, True]]),
    ), [2, 1, 2], [2, 2, 1]  # tokens per step, T_i of each step's rollout


def _hand_loss(logp, old, adv, n, T, ratio_level, aggregation, clip=(0.2, 0.28)):
    """Reference in plain Python: the pg term only (kl and entropy off)."""
    rows = []
    for s in range(3):
        toks = range(n[s])
        a = adv[s][0]
        if ratio_level == "action":
            rho = math.exp(sum(logp[s][k] - old[s][k] for k in toks))
            term = max(-a * rho, -a * min(max(rho, 1 - clip[0]), 1 + clip[1]))
            rows.append(term)  # the step's mean over its tokens of a constant
        else:
            vals = []
            for k in toks:
                rho = math.exp(logp[s][k] - old[s][k])
                vals.append(max(-a * rho, -a * min(max(rho, 1 - clip[0]), 1 + clip[1])))
            rows.append(vals)
    if aggregation == "token_mean":
        per = [r if isinstance(r, list) else [r] * n[s] for s, r in enumerate(rows)]
        flat = [v for r in per for v in r]
        return sum(flat) / len(flat)
    step_means = [sum(r) / len(r) if isinstance(r, list) else r for r in rows]
    if aggregation == "step_mean":
        return sum(step_means) / 3
    # 1/N sum_i 1/T_i sum_t with N = 2 rollouts: rollout 0 = steps 0, 1; rollout 1 = step 2
    return ((step_means[0] + step_means[1]) / 2 + step_means[2] / 1) / 2


@pytest.mark.parametrize("ratio_level", ["token", "action"])
@pytest.mark.parametrize("aggregation", ["token_mean", "step_mean", "rollout_mean_step_mean"])
def test_objective_options_match_hand_computed_loss_and_gradient(ratio_level, aggregation):
    from rubricgym.trainers.update import aggregation_weights

    case, n, T = _objective_case()
    samples = [StepSample([1], [1] * 2, "", None, None, 0.0, 0.0, loss_mask=[k < n[s] for k in range(2)],
                          rollout_steps=T[s]) for s in range(3)]
    w = aggregation_weights(samples, aggregation)
    weights = torch.tensor([[w[s] / n[s] if k < n[s] else 0.0 for k in range(2)] for s in range(3)], dtype=torch.float64)
    logp = case["logp"].clone().requires_grad_(True)
    terms = policy_loss(logp, case["old_logp"], None, case["advantages"], case["mask"], None, clip_low=0.2,
                        clip_high=0.28, kl_coef=0.0, entropy_coef=0.0, num_tokens=5, ratio_level=ratio_level,
                        weights=weights)
    lp, old, adv = case["logp"].tolist(), case["old_logp"].tolist(), case["advantages"].tolist()
    want = _hand_loss(lp, old, adv, n, T, ratio_level, aggregation)
    assert terms.loss.item() == pytest.approx(want, abs=1e-12)
    terms.loss.backward()
    eps = 1e-6  # central differences of the hand-written reference
    for s in range(3):
        for k in range(2):
            up = [row[:] for row in lp]
            down = [row[:] for row in lp]
            up[s][k] += eps
            down[s][k] -= eps
            numeric = (_hand_loss(up, old, adv, n, T, ratio_level, aggregation)
                       - _hand_loss(down, old, adv, n, T, ratio_level, aggregation)) / (2 * eps)
            assert logp.grad[s, k].item() == pytest.approx(numeric, abs=1e-6), (s, k)


def test_trca_estimators_default_to_the_papers_objective():
    trca = resolve_estimator("trca")
    assert (trca.ratio_level, trca.loss_aggregation) == ("action", "rollout_mean_step_mean")
    grpo = resolve_estimator("grpo")
    assert (grpo.ratio_level, grpo.loss_aggregation) == ("token", "token_mean")
    chosen = TrainConfig(algorithm=AlgorithmSettings(advantage="trca", ratio_level="token",
                                                     loss_aggregation="step_mean")).estimator
    assert (chosen.ratio_level, chosen.loss_aggregation) == ("token", "step_mean")
    with pytest.raises(ValueError):
        AlgorithmSettings(loss_aggregation="sequence_mean")


def test_step_aggregation_base_is_the_one_rule_of_every_trainer():
    """Hand-computed: three steps, the first two of a 2-step rollout, the third of a 4-step one;
    2, 0 and 3 trained tokens. The choice policy's trainer calls it with one token per step."""
    assert step_aggregation_base("token_mean", [2, 0, 3], [2, 2, 4]) == [2.0, 0.0, 3.0]
    assert step_aggregation_base("step_mean", [2, 0, 3], [2, 2, 4]) == [1.0, 1.0, 1.0]
    assert step_aggregation_base("rollout_mean_step_mean", [2, 0, 3], [2, 2, 4]) == [0.5, 0.5, 0.25]
    with pytest.raises(ValueError, match="unknown loss aggregation 'sum'"):
        step_aggregation_base("sum", [1], [1])
