"""The KL term's reference is the policy RL starts from: the base model without a warm start,
the warm-started adapter after one, kept across a resume (trainers/reference.py)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from rubricgym.models import load_causal_lm
from rubricgym.trainers.checkpoint import REFERENCE_FILE, read_checkpoint
from rubricgym.trainers.config import load_config
from rubricgym.trainers.parallel.choose import single_process
from rubricgym.trainers.reference import KLReference, adapter_disabled, trainable
from rubricgym.trainers.trainer import Trainer

SETTINGS = [
    "model.name=tiny", "env.factory=expert-word", "env.max_steps=2", "env.kwargs={num_tasks: 6}",
    "algorithm.advantage=grpo", "algorithm.group_size=4", "algorithm.tasks_per_iteration=1",
    "algorithm.kl_coef=0.05", "algorithm.skip_zero_advantage=false", "algorithm.entropy_coef=0.1", "algorithm.lr=0.01",
    "generation.max_new_tokens=8", "prompt.max_prompt_tokens=40",
    "warmup.steps=3", "warmup.lr=0.01", "warmup.games=2", "warmup.evaluate=false", "run.iterations=2", "run.progress=false",
    "run.evaluate_after=false", "run.keep_checkpoints=5",
]


def _tiny_lora():
    from peft import LoraConfig, get_peft_model

    model, tok = load_causal_lm("tiny", seed=0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    return get_peft_model(model, lora), tok


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def _perturb(model, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in trainable(model):
            p.add_(scale * torch.randn(p.shape, generator=gen))


def test_the_reference_is_the_base_until_captured_then_the_captured_adapter_bit_for_bit():
    model, tok = _tiny_lora()
    ids = torch.tensor([tok("put the apple in the box")["input_ids"]])
    parallel = single_process()
    _perturb(model, 0.3, seed=1)  # a "warm start"
    warm = _logits(model, ids)
    with adapter_disabled(model):
        base = _logits(model, ids)
    reference = KLReference()
    assert reference.is_base and reference.state is None
    with reference.applied(model, parallel):
        torch.testing.assert_close(_logits(model, ids), base, rtol=0, atol=0)

    reference.capture(model, parallel)
    assert not reference.is_base
    assert reference.state is not None and all(".default" not in k and "lora_" in k for k in reference.state)
    _perturb(model, 0.3, seed=2)  # RL moves the policy
    policy_params = [p.detach().clone() for p in trainable(model)]
    moved = _logits(model, ids)
    assert not torch.allclose(moved, warm)
    with reference.applied(model, parallel):
        torch.testing.assert_close(_logits(model, ids), warm, rtol=0, atol=0)
    assert all(torch.equal(p, q) for p, q in zip(trainable(model), policy_params, strict=True))  # restored exactly
    torch.testing.assert_close(_logits(model, ids), moved, rtol=0, atol=0)


def test_the_policy_is_restored_when_the_reference_pass_fails():
    model, _ = _tiny_lora()
    parallel = single_process()
    reference = KLReference()
    reference.capture(model, parallel)
    _perturb(model, 0.3, seed=3)
    policy_params = [p.detach().clone() for p in trainable(model)]
    with pytest.raises(RuntimeError, match="boom"), reference.applied(model, parallel):
        raise RuntimeError("boom")
    assert all(torch.equal(p, q) for p, q in zip(trainable(model), policy_params, strict=True))


def test_a_write_that_fails_partway_leaves_the_policy_as_it_was():
    """The second value has the wrong shape: the first was already written when it fails."""
    model, _ = _tiny_lora()
    params = trainable(model)
    policy_params = [p.detach().clone() for p in params]
    values = [torch.zeros_like(p) for p in params]
    values[1] = torch.zeros(3)
    with pytest.raises(RuntimeError), single_process().parameters_held_at(params, values):
        pytest.fail("the block must not run")
    assert all(torch.equal(p, q) for p, q in zip(params, policy_params, strict=True))


def _rl_lines(trainer):
    return [{k: v for k, v in m.items() if not k.endswith("_s")} for m in trainer.read_metrics()]


def test_after_a_warm_start_rl_starts_at_zero_kl_and_a_resume_keeps_the_reference(tmp_path):
    """The first RL update's KL is against the warm-started policy itself (0); the base model
    would give the warm start's own distance. A run stopped after iteration 1 resumes with the
    reference its checkpoints carry and gives the uninterrupted run's metrics."""
    full = Trainer(load_config(None, SETTINGS), tmp_path / "full")
    full.train()
    full.close()
    lines = _rl_lines(full)
    assert [m["iteration"] for m in lines] == [1, 2] and "kl" in lines[0], lines
    # one optimizer step: the KL is taken before it, where the policy is the warm start itself
    # (against the base model, the reference before this fix, it was 0.03 here)
    assert lines[0]["kl"] == pytest.approx(0.0, abs=1e-7)
    assert lines[1]["kl"] > 1e-3  # then the policy has moved away from it
    saved = load_file(str(tmp_path / "full" / "checkpoint-000000" / REFERENCE_FILE))
    assert saved.keys() == full.reference.state.keys()
    assert all(torch.equal(saved[k], full.reference.state[k]) for k in saved)

    cut = Trainer(load_config(None, SETTINGS), tmp_path / "cut")
    cut.train(stop_after=1)
    cut.close()
    resumed = Trainer.from_run_dir(tmp_path / "cut")
    assert not resumed.reference.is_base
    assert all(torch.equal(resumed.reference.state[k], saved[k]) for k in saved)
    resumed.train()
    resumed.close()
    assert _rl_lines(resumed) == lines
    assert json.loads((tmp_path / "cut" / "summary.json").read_text())["warmup"]["steps"] == 3


def test_without_a_warm_start_the_reference_stays_the_base_and_checkpoints_carry_none(tmp_path):
    trainer = Trainer(load_config(None, [*SETTINGS, "warmup.enabled=false", "run.iterations=1"]), tmp_path / "run")
    trainer.train()
    trainer.close()
    assert trainer.reference.is_base
    assert not list((tmp_path / "run").glob(f"checkpoint-*/{REFERENCE_FILE}"))
    # a reference file the manifest does not list (dropped in later) is never read
    checkpoint = sorted((tmp_path / "run").glob("checkpoint-*"))[-1]
    save_file({"x": torch.zeros(1)}, str(checkpoint / REFERENCE_FILE))
    assert read_checkpoint(checkpoint).reference is None
