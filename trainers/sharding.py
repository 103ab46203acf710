"""FSDP (torch's ``fully_shard``, FSDP2) for several training processes: the base model and the
LoRA adapter are sharded over the ranks, so a base model need not fit on one device.

A sharded model all-gathers its weights inside every forward, so every rank must call it the
same number of times. The trainer keeps that rule in three places: generation
(``HFGenerator`` with ``ranks``: one agreement per generate call and ``generate(synced_gpus=True)``
for the tokens), the update (``pad_passes``: ranks with fewer micro-batches run empty ones),
and the warm start, evaluations and entropy, which every rank runs identically anyway.

Gradients: FSDP averages them over the ranks in its reduce-scatter, while each rank's loss is
its share of the global loss (global denominators, trainers/update.py), so the update scales
each rank's loss by the number of ranks (``gradient_scale``); the warm start, the same on
every rank, keeps FSDP's average.

Checkpoints stay in the one pickle-free format: every rank joins the gathering of the full
LoRA and optimizer tensors (``full_adapter_state``, ``full_optimizer_state``), rank 0 writes;
on resume each rank cuts its own shard from the full tensors (``load_full_adapter``,
``optimizer_state_for``), without any collective.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from rubricgym.trainers.distributed import Ranks


def _is_dtensor(value: Any) -> bool:

    return isinstance(value, DTensor)


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


def gradient_scale(ranks: Ranks) -> float:
    """What a rank's share of the global loss is multiplied by before ``backward`` so that
    FSDP's averaged gradient is the sum of the shares."""
    return float(ranks.world_size) if ranks.sharded else 1.0


def norm_value(norm: Any) -> float:
    """``clip_grad_norm_``'s result as a float (a DTensor when the gradients are sharded)."""
    return float(norm.full_tensor()) if _is_dtensor(norm) else float(norm)


def _full(value: Any) -> Any:
    return value.full_tensor() if _is_dtensor(value) else value


def full_adapter_state(model: Any) -> dict[str, torch.Tensor]:
    """Every trainable (LoRA) parameter, whole, by its ``named_parameters`` name. A
    collective: every rank calls it."""
    return {name: _full(p.detach()).cpu().contiguous() for name, p in model.named_parameters() if p.requires_grad}


def full_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """``optimizer.state_dict()`` with whole tensors in place of shards. A collective."""
    sd = optimizer.state_dict()
    state = {pid: {k: _full(v) for k, v in entry.items()} for pid, entry in sd["state"].items()}
    return {"state": state, "param_groups": sd["param_groups"]}


def _shard_like(full: torch.Tensor, like: Any) -> Any:
    """This rank's shard of ``full`` laid out as ``like`` (a DTensor), cut locally."""

    return distribute_tensor(full.to(like.device, like.dtype), like.device_mesh, like.placements, src_data_rank=None)


@torch.no_grad()
def load_full_adapter(model: Any, adapter: Mapping[str, torch.Tensor]) -> list[str]:
    """Copy whole LoRA tensors (peft's saved keys: parameter names without the adapter name)
    into the sharded parameters; returns the parameters it found no tensor for."""
    missing = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        key = name.replace(".default", "")
        if key not in adapter:
            missing.append(name)
            continue
        p.copy_(_shard_like(adapter[key], p) if _is_dtensor(p) else adapter[key].to(p.device, p.dtype))
    return missing


def optimizer_state_for(optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> dict[str, Any]:
    """A saved (whole-tensor) optimizer state dict with each tensor cut to its parameter's shard."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    state = {}
    for pid, entry in state_dict["state"].items():
        p = params[int(pid)]
        state[pid] = {k: (_shard_like(v, p) if _is_dtensor(p) and isinstance(v, torch.Tensor) and v.dim() > 0 else v)
                      for k, v in entry.items()}
    return {"state": state, "param_groups": state_dict["param_groups"]}


def empty_loss(model: Any, pad_id: int, device: Any) -> torch.Tensor:
    """A one-token forward whose loss (0) contributes nothing to any gradient: backward on it
    keeps a rank with fewer micro-batches in step with the others' collectives."""
    ids = torch.full((1, 1), pad_id, dtype=torch.long, device=device)
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
    return logits.float().sum() * 0.0


@torch.no_grad()
def empty_pass(model: Any, pad_id: int, device: Any) -> None:
    """A forward without gradients that keeps a rank in step with the others' forwards."""
    empty_loss(model, pad_id, device)


def pad_passes(ranks: Ranks, local: int) -> int:
    """How many empty passes this rank adds so that every rank makes as many as the busiest.
    Agreed before any of the passes: a collective between two forwards would meet a peer's
    all-gather."""
    if not ranks.sharded:
        return 0
    return int(ranks.max([float(local)])[0]) - local
