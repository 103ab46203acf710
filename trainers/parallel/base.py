"""The one interface the trainer trains through, whatever runs it: ``ParallelStrategy``.

Its base implementation is the replicated strategy (one process, or several processes that
each hold the whole model): each rank's loss is its share of the global loss, and after the
local passes one all-reduce sums the LoRA gradients. FSDP (``fsdp.py``) and DeepSpeed ZeRO
(``zero.py``) refine it. The trainer calls, in order:

* ``prepare_model(model, device)`` once the model is built (adapter aligned over the ranks;
  FSDP shards), ``prepare_optimizer(optimizer, max_grad_norm)`` once the optimizer is;
* ``begin_update()`` before each RL update (ZeRO builds its engine the first time: the warm
  start trains the model before DeepSpeed owns it);
* per optimizer step: ``backward(loss, last)`` for each pass (``module`` is what the passes
  call), ``extra_passes(n)`` empty passes to keep a partitioned model's collectives in step,
  then ``step()`` (reduce, clip, step; the global gradient norm);
* ``lockstep`` for generation, ``autocast()`` around training forwards;
* ``parameters_held_at(params, values)`` around the KL reference's no-grad pass (after a
  warm start the reference is the warm-started adapter: ``trainers/reference.py``);
* ``full_adapter_state()`` / ``full_optimizer_state()`` (collectives) for checkpoints, and
  ``load_adapter`` / ``optimizer_state_for`` on resume; ``close()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from peft import set_peft_model_state_dict

from rubricgym.trainers.parallel.plan import ParallelPlan, ParallelRefused
from rubricgym.trainers.parallel.ranks import Ranks


def norm_value(norm: Any) -> float:
    """``clip_grad_norm_``'s result as a float (a DTensor when the gradients are sharded)."""
    full = getattr(norm, "full_tensor", None)
    return float(full() if full is not None else norm)


class GenerateLockstep:
    """Generation when every rank's forward is its own: nothing to agree on."""

    synced = False  # ``generate(synced_gpus=...)``: keep the token loops of the ranks in step

    def before_batch(self) -> None:
        """Called before each generate call."""

    def others_generating(self) -> bool:
        """Called by a rank whose rollouts are done: does another rank still generate?"""
        return False


class AgreedLockstep(GenerateLockstep):
    """A partitioned model gathers weights inside every forward, so every generate call is a
    collective: multi-turn rollouts of different lengths make different numbers of calls, and a
    rank that is done joins the others' calls with a one-token batch until none is left."""

    synced = True

    def __init__(self, ranks: Ranks):
        self.ranks = ranks

    def before_batch(self) -> None:
        self.ranks.max([1.0])  # agreement before each generate call: "I generate"

    def others_generating(self) -> bool:
        return self.ranks.max([0.0])[0] > 0  # agreement: "I am done"; anyone still generating answers 1


@torch.no_grad()
def write_values(params: Sequence[torch.Tensor], values: Sequence[torch.Tensor]) -> None:
    """Copy ``values`` into ``params`` in place (each laid out as its parameter is)."""
    for p, v in zip(params, values, strict=True):
        p.copy_(v)


def empty_loss(model: Any, pad_id: int, device: Any) -> torch.Tensor:
    """A one-token forward whose loss (0) contributes nothing to any gradient: backward on it
    keeps a rank with fewer micro-batches in step with the others' collectives."""
    ids = torch.full((1, 1), pad_id, dtype=torch.long, device=device)
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
    return logits.float().sum() * 0.0


class ParallelStrategy:
    """Replicated ranks: every rank holds the whole model and optimizer (also one process)."""

    def __init__(self, ranks: Ranks | None = None, plan: ParallelPlan | None = None):
        self.ranks = ranks or Ranks()
        self.plan = plan or ParallelPlan()
        self.lockstep: GenerateLockstep = GenerateLockstep()
        self.model: Any = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.max_grad_norm = 1.0
        self.params: list[torch.Tensor] = []
        self.scaler: torch.amp.GradScaler | None = None  # fp16: the loss scale (its state is checkpointed)

    # ---- what it is ---------------------------------------------------------------------
    @property
    def label(self) -> str:
        """The strategy's name in run files and the start line."""
        return "replicated"

    def start_line(self) -> str:
        """What the run's start line says of it: ``, 2 processes, FSDP, bf16 autocast``; empty
        for one process at full precision."""
        parts = [f"{self.ranks.world_size} processes, {self.label}"] if self.ranks.distributed else []
        if self.plan.mixed_precision != "no":
            parts.append(f"{self.plan.mixed_precision} autocast")
        return "".join(f", {p}" for p in parts)

    def run_metrics(self) -> dict[str, int]:
        """The strategy's fields of a several-process run's metrics lines."""
        return {"fsdp": 0, "deepspeed_zero": 0}

    def check_run(self, generation_backend: str, self_judge: bool) -> None:
        """Refuse, before the model loads, what this strategy cannot keep in step across ranks."""

    # ---- the model ------------------------------------------------------------------------
    def prepare_model(self, model: Any, device: torch.device) -> None:
        """Every rank starts from rank 0's adapter."""
        self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.ranks.broadcast_parameters([p for p in model.parameters() if p.requires_grad])

    def align_after_warm_start(self, model: Any) -> None:
        """Every rank warmed up alike; continue from rank 0's (checkpointed) adapter."""
        self.ranks.broadcast_parameters([p for p in model.parameters() if p.requires_grad])

    def prepare_optimizer(self, optimizer: torch.optim.Optimizer, max_grad_norm: float) -> None:
        self.optimizer, self.max_grad_norm = optimizer, max_grad_norm
        if self.plan.mixed_precision == "fp16" and self.model is not None:
            self.scaler = torch.amp.GradScaler(next(self.model.parameters()).device.type)

    def begin_update(self) -> None:
        """Called before each RL update."""

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Training forwards under the run's mixed precision (bf16 or fp16 autocast; weights,
        LoRA and AdamW state stay float32)."""
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.plan.mixed_precision)
        if dtype is not None and self.model is not None:
            return torch.autocast(device_type=next(self.model.parameters()).device.type, dtype=dtype)
        return contextlib.nullcontext()

    def warm_start_autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The warm start's forwards: bf16 autocast under bf16; float32 otherwise (its few SFT
        steps have an optimizer of their own and no loss scale)."""
        return self.autocast() if self.plan.mixed_precision == "bf16" else contextlib.nullcontext()

    @contextlib.contextmanager
    def parameters_held_at(self, params: Sequence[torch.Tensor],
                           values: Sequence[torch.Tensor]) -> Iterator[None]:
        """``params`` hold ``values`` (laid out as this rank holds them) inside the block and
        their own values again after it, bit for bit: the KL reference's no-grad pass. Every
        rank holds its own tensors (whole, or FSDP's shards), so a local copy does it."""
        saved = [p.detach().clone() for p in params]
        try:  # a write that fails partway is undone too
            write_values(params, values)
            yield
        finally:
            write_values(params, saved)

    # ---- one optimizer step ---------------------------------------------------------------
    @property
    def module(self) -> Any:
        """What the training passes call (the model, or an engine around it)."""
        return self.model

    def extra_passes(self, local: int) -> int:
        """Empty passes this rank adds so that every rank makes as many as the busiest."""
        return 0

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self) -> float:
        """Reduce, clip and step; the global gradient norm before clipping. Under fp16 the
        summed gradients are unscaled first, and a step whose gradients overflowed is skipped
        (the same decision on every rank: they hold the same sum)."""
        # replicated ranks: each share carries global weights, so the sum is the global gradient
        self.ranks.sum_gradients(self.params)
        assert self.optimizer is not None
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        norm = norm_value(torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm))
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        return norm

    # ---- checkpoints ----------------------------------------------------------------------
    def full_adapter_state(self) -> dict[str, torch.Tensor] | None:
        """The whole LoRA tensors when partitioned (a collective); None when every rank holds them."""
        return None

    def loss_scale_state(self) -> dict[str, float] | None:
        """fp16: the loss scaler's state (JSON numbers) for the checkpoint; None otherwise."""
        return {k: float(v) for k, v in self.scaler.state_dict().items()} if self.scaler is not None else None

    def load_loss_scale_state(self, state: Mapping[str, float] | None) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict({k: (int(v) if k in ("growth_interval", "_growth_tracker") else float(v))
                                         for k, v in state.items()})

    def full_optimizer_state(self) -> dict[str, Any] | None:
        """The optimizer state with whole tensors when partitioned (a collective); None otherwise."""
        return None

    def load_adapter(self, model: Any, adapter: Mapping[str, torch.Tensor]) -> str | None:
        """Copy saved LoRA tensors (peft's keys) into the model; what did not fit, if anything."""
        device = next(model.parameters()).device
        result = set_peft_model_state_dict(model, {k: v.to(device) for k, v in adapter.items()})
        unexpected = list(getattr(result, "unexpected_keys", None) or [])
        return f"unexpected keys {unexpected[:3]}..." if unexpected else None

    def optimizer_state_for(self, optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> dict[str, Any]:
        """A saved (whole-tensor) optimizer state dict laid out for this rank's optimizer."""
        return state_dict

    def close(self) -> None:
        """Release engine state while the process group still exists."""


class PartitionedStrategy(ParallelStrategy):
    """An engine that partitions the model or its optimizer over the ranks (FSDP, ZeRO): it
    reduces the gradients itself, and its forwards or backwards are collectives, so every rank
    makes as many generate calls and passes as the busiest one."""

    setting = ""  # the run config field that asks for it, named in refusals

    def __init__(self, ranks: Ranks, plan: ParallelPlan):
        super().__init__(ranks, plan)
        self.lockstep = AgreedLockstep(ranks)

    def check_run(self, generation_backend: str, self_judge: bool) -> None:
        if generation_backend != "hf":
            raise ParallelRefused(f"{self.setting} with generation.backend={generation_backend!r}: a sharded adapter "
                                  "is not exported to a generation server; use 'hf'")
        if self_judge:
            raise ParallelRefused(f"{self.setting} with judge.self_judge: the self-judge's calls are not kept in step "
                                  "across ranks; use an external judge")

    def extra_passes(self, local: int) -> int:
        # agreed before any of the passes: a collective between two passes would meet a peer's gather or reduce
        return int(self.ranks.max([float(local)])[0]) - local
