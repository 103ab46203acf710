"""FSDP (torch's ``fully_shard``, FSDP2) for several training processes: the base model and the
LoRA adapter are sharded over the ranks, so a base model need not fit on one device.

A sharded model all-gathers its weights inside every forward, so every rank must call it the
same number of times: generation agrees before each generate call (``AgreedLockstep``), the
update adds empty passes (``extra_passes``), and the warm start, evaluations and entropy run
identically on every rank anyway.

Gradients: FSDP averages them over the ranks in its reduce-scatter, while each rank's loss is
its share of the global loss (global denominators, trainers/update.py), so ``backward`` scales
each share by the number of ranks; the warm start, the same on every rank, keeps FSDP's average.

Checkpoints stay in the one pickle-free format: every rank joins the gathering of the full
LoRA and optimizer tensors, rank 0 writes; on resume each rank cuts its own shard from the
full tensors, without any collective.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from rubricgym.trainers.parallel.base import PartitionedStrategy, norm_value
from rubricgym.trainers.parallel.ranks import Ranks


def _full(value: Any) -> Any:
    return value.full_tensor() if isinstance(value, DTensor) else value


def _shard_like(full: torch.Tensor, like: Any) -> Any:
    """This rank's shard of ``full`` laid out as ``like`` (a DTensor), cut locally."""
    return distribute_tensor(full.to(like.device, like.dtype), like.device_mesh, like.placements, src_data_rank=None)


def shard_model(peft_model: Any, ranks: Ranks, device: torch.device) -> None:
    """``fully_shard`` every transformer block (the model's ``_no_split_modules`` classes) and
    then the causal LM under the peft wrapper as the root, so ``generate`` (which calls the
    causal LM directly) gathers the embeddings and head too. The mesh is named for the
    model's device (FSDP's default would pick CUDA whenever a GPU is visible)."""
    root = peft_model.get_base_model()
    blocks = set(getattr(root, "_no_split_modules", None) or ())
    if not blocks:
        raise NotImplementedError(f"{type(root).__name__} names no transformer block classes (_no_split_modules); "
                                  "run.fsdp cannot tell where to shard it")
    found = [m for m in root.modules() if type(m).__name__ in blocks]
    if not found:
        raise NotImplementedError(f"no module of {sorted(blocks)} in {type(root).__name__}; run.fsdp cannot shard it")
    mesh = init_device_mesh(device.type, (ranks.world_size,))
    for module in found:
        fully_shard(module, mesh=mesh)
    fully_shard(root, mesh=mesh)


class FsdpStrategy(PartitionedStrategy):
    """The model and adapter sharded over the ranks with FSDP2."""

    setting = "run.fsdp"

    @property
    def label(self) -> str:
        return "FSDP"

    def run_metrics(self) -> dict[str, int]:
        return {"fsdp": 1, "deepspeed_zero": 0}

    def prepare_model(self, model: Any, device: torch.device) -> None:
        super().prepare_model(model, device)
        shard_model(model, self.ranks, device)  # before the optimizer: it must hold the sharded parameters
        self.params = [p for p in model.parameters() if p.requires_grad]  # now DTensors

    def align_after_warm_start(self, model: Any) -> None:
        """A sharded adapter exists once, shard by shard: nothing to align."""

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        (loss * self.ranks.world_size).backward()  # FSDP's reduce-scatter averages: scale the share back to a sum

    def step(self) -> float:
        norm = norm_value(torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm))
        assert self.optimizer is not None
        self.optimizer.step()
        return norm

    def full_adapter_state(self) -> dict[str, torch.Tensor]:
        model = self.model
        return self.ranks.collective("gathering the adapter", lambda: {
            name: _full(p.detach()).cpu().contiguous() for name, p in model.named_parameters() if p.requires_grad})

    def full_optimizer_state(self) -> dict[str, Any]:
        optimizer = self.optimizer
        assert optimizer is not None

        def gather() -> dict[str, Any]:
            sd = optimizer.state_dict()
            state = {pid: {k: _full(v) for k, v in entry.items()} for pid, entry in sd["state"].items()}
            return {"state": state, "param_groups": sd["param_groups"]}

        return self.ranks.collective("gathering the optimizer state", gather)

    @torch.no_grad()
    def load_adapter(self, model: Any, adapter: Mapping[str, torch.Tensor]) -> str | None:
        """Copy whole LoRA tensors (peft's saved keys: parameter names without the adapter name)
        into the sharded parameters."""
        missing = []
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            key = name.replace(".default", "")
            if key not in adapter:
                missing.append(name)
                continue
            p.copy_(_shard_like(adapter[key], p) if isinstance(p, DTensor) else adapter[key].to(p.device, p.dtype))
        return f"no tensor for {missing[:3]}" if missing else None

    def optimizer_state_for(self, optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> dict[str, Any]:
        """Each saved whole tensor cut to its parameter's shard."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        state = {}
        for pid, entry in state_dict["state"].items():
            p = params[int(pid)]
            state[pid] = {k: (_shard_like(v, p) if isinstance(p, DTensor) and isinstance(v, torch.Tensor) and v.dim() > 0
                              else v) for k, v in entry.items()}
        return {"state": state, "param_groups": state_dict["param_groups"]}
