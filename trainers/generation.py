"""Batched sampling of responses for many prompts at once (one per active rollout).

``HFGenerator`` uses ``model.generate`` on the training model itself (LoRA active), with
left padding. ``VLLMGenerator`` hands the same token-id prompts to vLLM on a GPU and syncs
the LoRA adapter into it after each update; it is optional and fails clearly without vLLM.
Both return the response token ids, cut after the first end-of-turn token (kept, so the
policy learns to stop), with no padding.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from rubricgym.trainers.config import GenerationSettings
from rubricgym.trainers.parallel.base import GenerateLockstep


class Generator(Protocol):
    """What the rollout collector samples with. A generator may also offer ``finish()``: the
    collector calls it once its rollouts are done (``HFGenerator`` on a sharded model keeps
    joining the other ranks' generate calls there)."""

    def generate(self, prompts: Sequence[Sequence[int]]) -> list[list[int]]: ...

    def sync_weights(self, model: Any, iteration: int) -> None: ...


def stop_token_ids(tokenizer: Any, model: Any) -> list[int]:
    """End-of-turn ids: the tokenizer's EOS plus the generation config's (may be a list)."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for i in cfg_eos if isinstance(cfg_eos, (list, tuple)) else [cfg_eos]:
        if i is not None and int(i) not in ids:
            ids.append(int(i))
    return ids


def cut_response(ids: Sequence[int], stops: Sequence[int]) -> list[int]:
    """Keep tokens up to and including the first stop token."""
    out: list[int] = []
    for t in ids:
        out.append(int(t))
        if t in stops:
            break
    return out


class HFGenerator:
    """Sampling with ``transformers.generate`` on the (peft) training model; ``greedy``
    decodes the most likely tokens instead (held-out evaluation).

    ``lockstep`` (the run's ``ParallelStrategy.lockstep``): where every forward is a collective,
    the ranks agree before each generate call, a rank with nothing left joins the others' calls
    from ``finish()`` until all are done, and ``generate(synced_gpus=True)`` keeps the token
    loops in step; otherwise it does nothing."""

    def __init__(self, model: Any, tokenizer: Any, settings: GenerationSettings, greedy: bool = False,
                 lockstep: GenerateLockstep | None = None):
        self.model = model
        self.lockstep = lockstep or GenerateLockstep()
        self.tokenizer = tokenizer
        self.settings = settings
        self.greedy = greedy
        self.stops = stop_token_ids(tokenizer, model)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stops[0]
        self.generated_tokens = 0
        self.seconds = 0.0

    def sync_weights(self, model: Any, iteration: int) -> None:
        """Nothing to do: generation uses the training model's live weights."""

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]]) -> list[list[int]]:
        if not prompts:
            return []
        size = self.settings.batch_size or len(prompts)
        out: list[list[int]] = []
        for k in range(0, len(prompts), size):
            self.lockstep.before_batch()
            out.extend(self._generate_batch(prompts[k : k + size]))
        return out

    @torch.no_grad()
    def finish(self) -> None:
        """Join the other ranks' generate calls with a one-token batch until none is left (lockstep)."""
        while self.lockstep.others_generating():
            self._generate_batch([[self.pad_id]], count=False)

    def _generate_batch(self, prompts: Sequence[Sequence[int]], count: bool = True) -> list[list[int]]:
        started = time.perf_counter()
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            input_ids[row, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            attention[row, width - len(p) :] = 1
        was_training = self.model.training
        self.model.eval()
        sampling = ({"do_sample": False, "temperature": None, "top_p": None, "top_k": None} if self.greedy else
                    {"do_sample": True, "temperature": self.settings.temperature, "top_p": self.settings.top_p,
                     "top_k": self.settings.top_k or None})
        try:
            sampled = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                **sampling,
                max_new_tokens=self.settings.max_new_tokens,
                eos_token_id=self.stops,
                pad_token_id=self.pad_id,
                use_cache=True,
                synced_gpus=self.lockstep.synced,
            )
        finally:
            if was_training:
                self.model.train()
        responses = [cut_response(row[width:].tolist(), self.stops) for row in sampled]
        if count:
            self.generated_tokens += sum(len(r) for r in responses)
            self.seconds += time.perf_counter() - started
        return responses


class VLLMUnavailable(RuntimeError):
    pass


class VLLMGenerator:
    """vLLM sampling on a GPU with the current LoRA adapter (unverified without a GPU loan;
    see docs/trainer.md). The adapter is saved after each update and loaded as a new
    ``LoRARequest`` so vLLM never samples from stale weights."""

    def __init__(self, base_path: str, tokenizer: Any, settings: GenerationSettings, lora_rank: int,
                 adapter_dir: Path, seed: int = 0):
        try:
            from vllm import LLM, SamplingParams  # noqa: F401  # optional: vLLM (GPU only)
        except ImportError as exc:
            raise VLLMUnavailable(
                "generation.backend='vllm' needs vLLM on a CUDA machine (`pip install vllm`); "
                "use generation.backend='hf' otherwise"
            ) from exc
        if not torch.cuda.is_available():
            raise VLLMUnavailable("generation.backend='vllm' needs a CUDA GPU")
        from vllm import LLM  # optional: vLLM (GPU only)

        self.tokenizer = tokenizer
        self.settings = settings
        self.adapter_dir = Path(adapter_dir)
        self.llm = LLM(model=str(base_path), enable_lora=True, max_lora_rank=max(8, lora_rank),
                       gpu_memory_utilization=settings.vllm_gpu_memory_utilization, seed=seed,
                       dtype="bfloat16")
        self.lora_request: Any = None
        self.generated_tokens = 0
        self.seconds = 0.0

    def sync_weights(self, model: Any, iteration: int) -> None:
        from vllm.lora.request import LoRARequest  # optional: vLLM (GPU only)

        path = self.adapter_dir / f"iter-{iteration:06d}"
        model.save_pretrained(str(path))
        self.lora_request = LoRARequest(f"policy-{iteration}", iteration + 1, str(path))

    def generate(self, prompts: Sequence[Sequence[int]]) -> list[list[int]]:
        from vllm import SamplingParams  # optional: vLLM (GPU only)
        from vllm.inputs import TokensPrompt  # optional: vLLM (GPU only)

        started = time.perf_counter()
        params = SamplingParams(temperature=self.settings.temperature, top_p=self.settings.top_p,
                                top_k=self.settings.top_k or -1, max_tokens=self.settings.max_new_tokens)
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params,
                                 lora_request=self.lora_request, use_tqdm=False)
        stops = [self.tokenizer.eos_token_id]
        responses = [cut_response(list(o.outputs[0].token_ids), stops) for o in outs]
        self.generated_tokens += sum(len(r) for r in responses)
        self.seconds += time.perf_counter() - started
        return responses
