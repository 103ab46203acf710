"""DeepSpeed ZeRO for several training processes (``run.deepspeed_zero``, or an accelerate
DeepSpeed config): the LoRA optimizer state (stage 1), its gradients (2) and the model's
weights (3) are partitioned over the ranks by DeepSpeed's engine.

The engine is built at the first RL update, around the model and the trainer's own AdamW
(``deepspeed.initialize`` with a client optimizer): the warm start, which has an optimizer of
its own, trains the model before DeepSpeed owns it, the same on every rank. From then on every
training pass goes through the engine (``engine.backward``; the step's last pass is its
accumulation boundary, ``engine.step`` reduces, clips and steps), and, as under FSDP, every
rank makes the same number of passes (``extra_passes``): ZeRO-2 reduces gradients inside each
backward. Only ZeRO-3 gathers weights inside each forward, so only ZeRO-3 keeps generate calls in
step (``AgreedLockstep``); at stages 1 and 2 every rank holds the whole weights and generates on
its own, without a collective per generated token.

The update weights each rank's loss as its share of the global loss and DeepSpeed averages
gradients over the ranks, so each share is scaled by the number of ranks (the same rule as
FSDP, ``fsdp.py``).

Checkpoints stay in the one pickle-free format and DeepSpeed's own checkpoint files are never
written or read: every rank joins the gathering of the whole LoRA tensors and AdamW moments
(DeepSpeed's ``safe_get_full_*``), rank 0 writes them as a torch AdamW state dict. On resume
the checkpoint is loaded into the plain model and optimizer before the engine exists; building
the engine then moves that optimizer state into its partitions (``safe_set_full_optimizer_state``).

DeepSpeed's mixed precision, offloading and config files are not used (refused in ``plan.py``,
with the reasons): the engine's config is built here from the run config (stage, gradient clipping).
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from rubricgym.process_state import preserved_process_state
from rubricgym.trainers.parallel.base import GenerateLockstep, PartitionedStrategy, write_values
from rubricgym.trainers.parallel.plan import ParallelPlan
from rubricgym.trainers.parallel.ranks import Ranks


def deepspeed_config(stage: int, world_size: int, max_grad_norm: float) -> dict[str, Any]:
    """The engine's config: one micro-batch per step as DeepSpeed counts them (the trainer
    marks the accumulation boundary itself), the run's clipping, the client optimizer."""
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "train_batch_size": world_size,
        "gradient_clipping": float(max_grad_norm),
        "zero_optimization": {"stage": int(stage)},
        "zero_allow_untested_optimizer": True,  # torch's AdamW, the trainer's own
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


class ZeroStrategy(PartitionedStrategy):
    """The optimizer step through DeepSpeed's ZeRO engine at ``plan.zero_stage``."""

    setting = "run.deepspeed_zero"

    def __init__(self, ranks: Ranks, plan: ParallelPlan):
        super().__init__(ranks, plan)
        self.stage = int(plan.zero_stage or 2)
        if self.stage < 3:  # forwards are this rank's own: nothing to agree on while generating
            self.lockstep = GenerateLockstep()
        self.engine: Any = None
        self.zero: Any = None
        self.group_sizes: list[int] = []

    @property
    def label(self) -> str:
        return f"DeepSpeed ZeRO-{self.stage}"

    def run_metrics(self) -> dict[str, int]:
        return {"fsdp": 0, "deepspeed_zero": self.stage}

    def check_run(self, generation_backend: str, self_judge: bool) -> None:
        super().check_run(generation_backend, self_judge)
        require_deepspeed(self.ranks.device.type == "cpu")

    def begin_update(self) -> None:
        """Build the engine at the first RL update, around the model and the trainer's AdamW."""
        if self.engine is not None:
            return
        import deepspeed  # optional: the deepspeed extra

        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
        # DeepSpeed calls torch.distributed's older collective names; torch warns on every call
        warnings.filterwarnings("ignore", category=FutureWarning, message=r"`torch\.distributed\.\w+` is deprecated")
        model, optimizer = self.model, self.optimizer
        assert model is not None and optimizer is not None
        self.group_sizes = [len(g["params"]) for g in optimizer.param_groups]
        # a resumed optimizer's per-parameter state: moved into the engine's partitions below
        saved = {i: optimizer.state.pop(p) for i, p in enumerate(self.params) if p in optimizer.state}
        config = deepspeed_config(self.stage, self.ranks.world_size, self.max_grad_norm)
        device = next(model.parameters()).device
        # building the engine must not move the run's random streams (resume exactness)
        with preserved_process_state(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            self.engine, self.zero, _, _ = self.ranks.collective(
                "starting DeepSpeed", lambda: deepspeed.initialize(model=model, optimizer=optimizer, config=config))
        if saved:
            self._adopt(saved)

    @property
    def module(self) -> Any:
        return self.engine if self.engine is not None else self.model

    def close(self) -> None:
        """Release the engine's state while the process group still exists (not in a
        destructor at interpreter exit)."""
        if self.engine is not None:
            self.engine.destroy()
            self.engine = None

    @contextlib.contextmanager
    def parameters_held_at(self, params: Sequence[torch.Tensor],
                           values: Sequence[torch.Tensor]) -> Iterator[None]:
        """ZeRO-3 partitions the weights once its engine exists: gather them whole, write, and
        let rank 0's values be partitioned again (every rank writes the same). The engine's
        master partitions (its own fp32 copy, even in fp32) are not touched, and the policy's
        own values are written back after the pass, bit for bit."""
        if self.stage < 3 or self.engine is None:
            with super().parameters_held_at(params, values):
                yield
            return
        import deepspeed  # optional: the deepspeed extra

        gathered = deepspeed.zero.GatheredParameters
        with gathered(list(params), modifier_rank=0):  # one gather to save and write
            saved = [p.detach().clone() for p in params]
            try:
                write_values(params, values)
            except BaseException:  # a write that fails partway is undone too
                write_values(params, saved)
                raise
        try:
            yield
        finally:
            with gathered(list(params), modifier_rank=0):
                write_values(params, saved)

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(last)
        # DeepSpeed averages gradients over the ranks: scale each rank's share back to a sum
        self.ranks.collective("a DeepSpeed backward", lambda: self.engine.backward(loss * self.ranks.world_size))

    def step(self) -> float:
        self.ranks.collective("a DeepSpeed step", self.engine.step)
        return float(self.engine.get_global_grad_norm())

    # ---- whole tensors for the checkpoint (collectives: every rank calls them) ----------
    def full_adapter_state(self) -> dict[str, torch.Tensor] | None:
        if self.engine is None:  # before the first update (the warm start's checkpoint): every rank holds them whole
            return None
        return self.ranks.collective("gathering the adapter", self._full_adapter_state)

    def full_optimizer_state(self) -> dict[str, Any] | None:
        if self.engine is None:
            return None
        return self.ranks.collective("gathering the optimizer state", self._full_optimizer_state)

    def _flat_partitions(self) -> list[torch.Tensor]:
        """This rank's fp32 partitions, the tensors torch's AdamW steps (ZeRO-3 keeps them out
        of the optimizer's groups between steps)."""
        flats = getattr(self.zero, "fp32_partitioned_groups_flat", None)  # stage 3
        return list(flats if flats is not None else self.zero.single_partition_of_fp32_groups)  # stages 1, 2

    def _full_adapter_state(self) -> dict[str, torch.Tensor]:
        """Every trainable (LoRA) parameter, whole, by its ``named_parameters`` name."""
        from deepspeed.utils import safe_get_full_fp32_param  # optional: the deepspeed extra

        return {name: safe_get_full_fp32_param(p).to(p.dtype).cpu().contiguous()
                for name, p in self.model.named_parameters() if p.requires_grad}

    def _full_optimizer_state(self) -> dict[str, Any]:
        """The AdamW state as torch's ``optimizer.state_dict()`` of the unwrapped optimizer
        would hold it: per parameter, whole tensors; the groups' settings."""
        from deepspeed.utils import safe_get_full_optimizer_state  # optional: the deepspeed extra

        assert self.optimizer is not None
        flats = self._flat_partitions()
        template = self.optimizer.state.get(flats[0]) if flats else None
        state: dict[int, dict[str, Any]] = {}
        if template:  # after the engine's first step
            for i, p in enumerate(self.params):
                entry: dict[str, Any] = {}
                for key, value in template.items():
                    if torch.is_tensor(value) and value.dim() > 0:
                        entry[key] = safe_get_full_optimizer_state(p, key).to(torch.float32).cpu().contiguous()
                    else:
                        entry[key] = value.clone() if torch.is_tensor(value) else value
                state[i] = entry
        groups, start = [], 0
        for size, group in zip(self.group_sizes, self.optimizer.param_groups, strict=True):
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": list(range(start, start + size))})
            start += size
        return {"state": state, "param_groups": groups}

    def _adopt(self, saved: dict[int, dict[str, Any]]) -> None:
        """Move whole per-parameter AdamW state into the engine's partitions: create the state
        torch's AdamW would have for each partition (its first step creates it lazily), link
        DeepSpeed's views to it, then write each parameter's slice."""
        from deepspeed.utils import safe_set_full_optimizer_state  # optional: the deepspeed extra

        assert self.optimizer is not None
        template = next(iter(saved.values()))
        for flat in self._flat_partitions():
            self.optimizer.state[flat] = {
                k: (torch.zeros_like(flat) if v.dim() > 0 else v.clone()) if torch.is_tensor(v) else v
                for k, v in template.items()}
        link = getattr(self.zero, "_lazy_init_hp_params_optimizer_state", None)  # stages 1, 2
        if link is not None:
            link()
        for i, p in enumerate(self.params):
            for key, value in saved.get(i, {}).items():
                if torch.is_tensor(value) and value.dim() > 0:
                    safe_set_full_optimizer_state(p, value.to(torch.float32), key)


def require_deepspeed(device_is_cpu: bool) -> None:
    """A clear error, before the model loads, when DeepSpeed is not installed. On CPU its
    accelerator is named (DeepSpeed would otherwise warn that it found no GPU)."""
    if device_is_cpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    try:
        import deepspeed  # noqa: F401  # optional: the deepspeed extra
    except ImportError as exc:
        raise ImportError("DeepSpeed ZeRO (run.deepspeed_zero or an accelerate DeepSpeed config) needs DeepSpeed: "
                          "pip install 'rubricgym[deepspeed]' (docs/scale.md)") from exc
