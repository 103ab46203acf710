"""``use_vllm=True``: the rollout generates each turn through TRL's vLLM engine object and hands
TRL the sampler's log-probs, aligned with the completion (0 on observation tokens).

vLLM needs a GPU, which these machines lack, so the engine object here is a stand-in with
``VLLMGeneration.generate``'s contract that samples from the training model itself with
transformers; everything else is real (ALFWorld, TRL's GRPOTrainer and its vLLM branch: the
weight sync call, the importance-sampling correction that reads the log-probs)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from integrations.trl_setup import make_trainer, need_trl_stack

pytestmark = pytest.mark.slow


class TransformersGeneration:
    """``trl.generation.vllm_generation.VLLMGeneration``'s ``generate`` and ``sync_weights``,
    sampling with the trainer's model; the log-probs are those of TRL's own scoring (logits
    over temperature), so a correct alignment gives TRL's old log-probs back."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self.max_completion_length = int(trainer.max_completion_length)
        self.calls: list[tuple[int, int]] = []  # (prompts, max_completion_length) per call
        self.synced = 0

    def sync_weights(self) -> None:
        self.synced += 1  # the stand-in samples from the training model: nothing to copy

    def generate(self, prompts: list[list[int]], images: Any, num_generations: int,
                 profiler: Any = None) -> tuple[Any, ...]:
        assert images is None and num_generations == 1
        self.calls.append((len(prompts), self.max_completion_length))
        trainer, tokenizer = self.trainer, self.trainer.processing_class
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt):] = torch.tensor(prompt)
            attention[row, width - len(prompt):] = 1
        config = trainer.generation_config
        config.max_new_tokens = self.max_completion_length
        with torch.no_grad():
            out = trainer.model.generate(input_ids=ids, attention_mask=attention, generation_config=config,
                                         return_dict_in_generate=True, output_logits=True)
        stops = set(trainer.eos_token_ids)
        completions, logprobs = [], []
        for row, tokens in enumerate(out.sequences[:, width:].tolist()):
            end = next((i + 1 for i, t in enumerate(tokens) if t in stops), len(tokens))
            lps = [torch.log_softmax(out.logits[i][row].float() / trainer.temperature, -1)[tokens[i]].item()
                   for i in range(end)]
            completions.append(tokens[:end])
            logprobs.append([[lp] for lp in lps])
        return prompts, completions, logprobs, None


def test_use_vllm_generates_every_turn_through_the_engine_with_aligned_logprobs(tmp_path):
    need_trl_stack()
    trainer = make_trainer(tmp_path, groups=1)
    trainer.use_vllm, trainer._last_loaded_step = True, -1  # what GRPOTrainer sets with use_vllm=True
    trainer.vllm_generation = engine = TransformersGeneration(trainer)
    trainer.train()

    turn_cap = min(trainer.rollout_func.max_new_tokens, trainer.max_completion_length)
    assert engine.synced >= 1 and engine.calls
    assert all(cap == turn_cap for _, cap in engine.calls)  # one turn's cap, not the episode's
    assert engine.max_completion_length == trainer.max_completion_length  # restored after each call
    assert [n for n, _ in engine.calls] == sorted((n for n, _ in engine.calls), reverse=True)  # finished rows leave
    steps = max(len(e.steps) for e in trainer.last_episodes)
    assert len(engine.calls) == steps
    # TRL compared its own old log-probs with the rollout's on every model token (env_mask 1):
    # misaligned by a single token, they would differ by whole nats
    history = {k: v for row in trainer.state.log_history for k, v in row.items()}
    assert history["sampling/sampling_logp_difference/max"] < 1e-3
    assert 0.999 < history["sampling/importance_sampling_ratio/min"] <= 1.001
    trainer.rollout_func.close()


def test_the_rollout_returns_logprobs_per_completion_token(tmp_path):
    """Observation tokens get 0 (not sampled), model tokens the engine's log-probs."""
    need_trl_stack()
    trainer = make_trainer(tmp_path, groups=1)
    trainer.use_vllm = True
    trainer.vllm_generation = TransformersGeneration(trainer)
    trainer.rubricgym_rows = [{"seed": 0, "prompt": []}] * 2
    try:
        out = trainer.rollout_func([[]] * 2, trainer)
    finally:
        trainer.rubricgym_rows = None
        trainer.rollout_func.close()
    for ids, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
        assert len(ids) == len(mask) == len(lps)
        assert all(lp == 0.0 for lp, m in zip(lps, mask, strict=True) if m == 0)
        model = [lp for lp, m in zip(lps, mask, strict=True) if m == 1]
        assert model and all(lp is not None and lp <= 0.0 for lp in model) and any(lp < 0.0 for lp in model)
