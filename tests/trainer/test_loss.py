"""The loss function and the update step: hand-computed values, KL at the start, clipping,
gradient accumulation, and log-probs that match what generation sampled."""

from __future__ import annotations

import math

import pytest
import torch
from peft import LoraConfig, get_peft_model

from rubricgym.models import build_tiny_model
from rubricgym.trainers.config import AlgorithmSettings
from rubricgym.trainers.loss import entropy_from_logits, policy_loss
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.update import collate, ppo_update, response_logprobs

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


def _lora_tiny(seed=0):
    model, tok = build_tiny_model(seed)
    torch.manual_seed(seed)  # LoRA's A matrices are drawn from the global generator
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            task_type="CAUSAL_LM"))
    return peft, tok


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
    model, tok = _lora_tiny()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    settings = AlgorithmSettings(micro_batch_size=4)
    stats = ppo_update(model, opt, None, _samples(tok), settings, pad_id=tok.pad_token_id)
    assert stats["kl"] == 0.0  # a fresh LoRA adapter is the identity: policy == base
    assert stats["ratio"] == pytest.approx(1.0)
    stats2 = ppo_update(model, opt, None, _samples(tok), settings, pad_id=tok.pad_token_id)
    assert stats2["kl"] > 0.0  # after one step the policy has moved away from the base


def test_clipping_engages_when_several_steps_move_the_ratio():
    model, tok = _lora_tiny()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.2)
    settings = AlgorithmSettings(micro_batch_size=8, epochs=4, minibatches=2, kl_coef=0.0)
    stats = ppo_update(model, opt, None, _samples(tok, n=8), settings, pad_id=tok.pad_token_id,
                       generator=torch.Generator().manual_seed(0))
    assert stats["optimizer_steps"] == 8
    assert stats["clip_frac"] > 0.0


def test_gradient_accumulation_matches_one_big_batch():
    results = []
    for size in (1, 3, 16):
        model, tok = _lora_tiny(seed=5)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
        ppo_update(model, opt, None, _samples(tok, n=7, seed=2), AlgorithmSettings(micro_batch_size=size,
                   max_grad_norm=1e9), pad_id=tok.pad_token_id)
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
    gen_logp = torch.stack([torch.log_softmax(l.float(), -1) for l in out.logits], 1).gather(-1, gen.unsqueeze(-1)).squeeze(-1)
    samples = [StepSample(prompt_ids=p, response_ids=gen[i].tolist(), response_text="", reasoning_tokens=None,
                          action_tokens=None, reward=0.0, env_reward=0.0) for i, p in enumerate(prompts)]
    with torch.no_grad():
        logp, _ = response_logprobs(model, collate(samples, tok.pad_token_id))
    assert torch.allclose(logp, gen_logp, atol=1e-4)
