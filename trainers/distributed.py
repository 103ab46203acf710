"""Several training processes (``torchrun`` / ``accelerate launch``): the process group and
the few collectives the trainer needs, on plain tensors and JSON (nothing is pickled).

``Ranks`` is the whole interface. With one process (no ``WORLD_SIZE``, or 1) every
operation is the identity, so one-process results are unchanged. With ``WORLD_SIZE > 1``
each rank rolls out whole groups, the loss's denominators are summed over the ranks first,
and the LoRA gradients are summed after each rank's local accumulation (docs/scale.md).

A collective that fails (a peer died, or none answered within ``run.collective_timeout_s``)
raises ``RankFailure``, so a surviving rank stops with a clear error instead of hanging.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


class RankFailure(RuntimeError):
    """A collective operation failed: another rank died or did not answer in time."""


@dataclass
class Ranks:
    """This process's place in the run (rank 0 of 1 when not launched distributed)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))  # where collective tensors live
    timeout_s: float = 0.0
    owns_group: bool = False  # this object initialised the process group (and destroys it)
    failed: bool = False
    # an engine partitions the model or its optimizer over the ranks (FSDP, trainers/sharding.py; DeepSpeed
    # ZeRO, trainers/zero.py): it reduces the gradients itself and every rank calls the model in step
    sharded: bool = False

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def share(self, count: int) -> list[int]:
        """Indices of this rank's items among ``count`` (round robin: item k goes to rank
        k mod world_size), the same split on every rank."""
        return list(range(self.rank, count, self.world_size))

    # ---- collectives (the identity with one process) -----------------------------------
    def collective(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (which talks to the other ranks); its failure is a ``RankFailure`` naming
        ``what``."""
        try:
            return fn()
        except (RuntimeError, dist.DistError) as exc:
            self.failed = True
            raise RankFailure(
                f"rank {self.rank} of {self.world_size}: {what} failed - another rank died or did not answer "
                f"within run.collective_timeout_s={self.timeout_s:g} s ({str(exc).splitlines()[0][:300]})") from None

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sum over the ranks (float64)."""
        if not self.distributed:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        self.collective("summing counts", lambda: dist.all_reduce(t))
        return [float(v) for v in t.cpu().tolist()]

    def max(self, values: Sequence[float]) -> list[float]:
        if not self.distributed:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.device)
        self.collective("taking a maximum", lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX))
        return [float(v) for v in t.cpu().tolist()]

    def sum_gradients(self, params: Sequence[torch.Tensor]) -> None:
        """Replace each parameter's gradient by its sum over the ranks (one flat all-reduce;
        a rank without micro-batches in this step contributes zeros)."""
        if not self.distributed or not params:
            return
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        self.collective("summing gradients", lambda: dist.all_reduce(flat))
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    def broadcast_parameters(self, params: Sequence[torch.Tensor]) -> None:
        """Rank 0's values into every rank's tensors (the adapter starts identical everywhere)."""
        if not self.distributed or not params:
            return
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in params]).to(self.device)
            self.collective("broadcasting parameters", lambda: dist.broadcast(flat, src=0))
            offset = 0
            for p in params:
                n = p.numel()
                p.copy_(flat[offset : offset + n].view_as(p))
                offset += n

    def gather_json(self, value: Any) -> list[Any]:
        """Every rank's JSON-able ``value``, in rank order (UTF-8 bytes in padded tensors)."""
        if not self.distributed:
            return [value]
        data = json.dumps(value).encode("utf-8")
        size = torch.tensor([len(data)], dtype=torch.long, device=self.device)
        sizes = [torch.zeros_like(size) for _ in range(self.world_size)]
        self.collective("gathering sizes", lambda: dist.all_gather(sizes, size))
        width = max(int(s.item()) for s in sizes)
        buf = torch.zeros(width, dtype=torch.uint8, device=self.device)
        buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device) if data else buf[:0]
        out = [torch.zeros_like(buf) for _ in range(self.world_size)]
        self.collective("gathering records", lambda: dist.all_gather(out, buf))
        return [json.loads(bytes(o[: int(s.item())].cpu().tolist()).decode("utf-8")) for o, s in zip(out, sizes)]

    def broadcast_json(self, value: Any) -> Any:
        """Rank 0's JSON-able ``value`` on every rank."""
        return self.gather_json(value if self.is_main else None)[0]

    def barrier(self) -> None:
        if self.distributed:
            self.collective("waiting for every rank", lambda: dist.barrier())

    def close(self) -> None:
        """Destroy the process group this object created (skipped after a failure: a group
        with a dead peer is left to the process exit)."""
        if self.owns_group and not self.failed:
            if dist.is_initialized():
                # every rank done with every collective before any rank tears its sockets down
                # (a peer exiting while another still reads from it can abort that process)
                try:
                    dist.barrier()
                except (RuntimeError, dist.DistError) as exc:
                    log.warning("rank %d: the closing barrier failed (%s); the run's files are complete",
                                self.rank, str(exc).splitlines()[0][:200])
                    return
                dist.destroy_process_group()
        self.owns_group = False


# What ``accelerate launch`` sets for a config with a sharding plugin. FSDP (run.fsdp) and
# DeepSpeed ZeRO (run.deepspeed_zero) are driven by the trainer itself; Megatron-LM would
# silently shard nothing, so it is refused.
FSDP_LAUNCH_VARIABLE = "ACCELERATE_USE_FSDP"
DEEPSPEED_LAUNCH_VARIABLE = "ACCELERATE_USE_DEEPSPEED"
ZERO_STAGE_LAUNCH_VARIABLE = "ACCELERATE_DEEPSPEED_ZERO_STAGE"
UNSUPPORTED_LAUNCH_VARIABLES = {"ACCELERATE_USE_MEGATRON_LM": "Megatron-LM"}
# DeepSpeed settings of an accelerate config that the trainer does not apply: refused, not ignored
UNSUPPORTED_DEEPSPEED_VARIABLES = {
    "ACCELERATE_DEEPSPEED_CONFIG_FILE": "a DeepSpeed config file (the trainer builds the DeepSpeed config from the "
                                        "run config: stage, gradient clipping)",
    "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE": "offloading the optimizer state",
    "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE": "offloading the parameters",
}


@dataclass(frozen=True)
class LaunchSharding:
    """The sharding an ``accelerate launch`` config asks for (nothing for torchrun)."""

    fsdp: bool = False
    zero_stage: int | None = None


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in ("1", "true", "yes")


def launch_sharding(environ: Mapping[str, str]) -> LaunchSharding:
    """What the launcher's environment asks for; ``NotImplementedError`` for Megatron-LM and for
    DeepSpeed settings the trainer does not apply (a config file, offloading, stage 0)."""
    asked = [name for var, name in UNSUPPORTED_LAUNCH_VARIABLES.items() if _flag(environ, var)]
    if asked:
        raise NotImplementedError(
            f"the accelerate config asks for {' and '.join(asked)}, which rubricgym's trainer does not support: it "
            "drives the model itself (replicated, sharded with FSDP, or through DeepSpeed ZeRO), so nothing would "
            "be sharded; launch with configs/accelerate/ddp.yaml, fsdp.yaml or deepspeed_zero2.yaml (docs/scale.md)")
    if not _flag(environ, DEEPSPEED_LAUNCH_VARIABLE):
        return LaunchSharding(fsdp=_flag(environ, FSDP_LAUNCH_VARIABLE))
    for var, what in UNSUPPORTED_DEEPSPEED_VARIABLES.items():
        value = environ.get(var, "").strip().lower()
        if value and value != "none":
            raise NotImplementedError(f"the accelerate DeepSpeed config asks for {what} ({var}={environ[var]!r}), "
                                      "which rubricgym's trainer does not apply; remove it (docs/scale.md)")
    raw = environ.get(ZERO_STAGE_LAUNCH_VARIABLE, "").strip() or "2"
    if raw not in ("1", "2", "3"):
        raise NotImplementedError(f"the accelerate DeepSpeed config asks for ZeRO stage {raw!r}; the trainer runs "
                                  "stages 1, 2 and 3 (stage 0 is plain data parallel: configs/accelerate/ddp.yaml)")
    return LaunchSharding(zero_stage=int(raw))


def init_ranks(timeout_s: float, cuda: bool) -> Ranks:
    """The process group from the launcher's environment (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``: torchrun and accelerate set them);
    gloo on CPU, nccl on CUDA, collectives time out after ``timeout_s``. Reuses a group that
    the caller (e.g. ``accelerate.Accelerator``) already initialised."""
    launch_sharding(os.environ)  # refuses Megatron-LM and unsupported DeepSpeed settings before anything loads
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1 and not (dist.is_available() and dist.is_initialized()):
        return Ranks()
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    owns = False
    if not dist.is_initialized():
        missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
        if missing:
            raise RuntimeError(f"WORLD_SIZE={world} but {', '.join(missing)} is not set; start several processes "
                               "with torchrun or accelerate launch (docs/scale.md)")
        backend = "nccl" if cuda else "gloo"
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
        owns = True
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    device = torch.device("cuda", local) if dist.get_backend() == "nccl" else torch.device("cpu")
    return Ranks(rank=rank, world_size=world, local_rank=local, device=device, timeout_s=timeout_s, owns_group=owns)


# ---- metrics from every rank ---------------------------------------------------------------
# How each rollout metric of ``trainer.group_metrics`` is combined over ranks: a mean over
# rollouts, over steps, over steps with a TRCA record, or a plain sum.
METRIC_WEIGHTS = {"success_rate": "rollouts", "return_mean": "rollouts", "env_return_mean": "rollouts",
                  "episode_steps": "rollouts", "action_parsed_rate": "steps", "response_tokens_mean": "steps",
                  "trca_reward_mean": "trca_steps", "rollout_errors": "sum", "distinct_group_share": "compared_groups"}


def merge_rank_metrics(parts: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """One rank-independent set of rollout metrics from each rank's ``{"metrics": ...,
    "counts": {"rollouts", "steps", "trca_steps", "compared_groups"}}``: count-weighted means, summed counts."""
    out: dict[str, float] = {}
    keys = sorted({k for p in parts for k in p["metrics"]})
    for key in keys:
        kind = METRIC_WEIGHTS.get(key, "rollouts")
        have = [p for p in parts if key in p["metrics"]]
        if kind == "sum":
            out[key] = float(sum(p["metrics"][key] for p in have))
            continue
        weight = sum(p["counts"][kind] for p in have)
        if weight > 0:
            out[key] = float(sum(p["metrics"][key] * p["counts"][kind] for p in have) / weight)
    return out


# ---- each rank's random state, as JSON (checkpoints) --------------------------------------
def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().contiguous().numpy().tobytes()).decode("ascii")


def _from_b64(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(text, validate=True)), dtype=torch.uint8).clone()


def rng_snapshot() -> dict[str, Any]:
    """This process's torch (CPU and current CUDA device), Python and NumPy RNG states."""
    version, internal, gauss = random.getstate()
    algorithm, keys, position, has_gauss, cached = np.random.get_state()
    cuda = [_b64(torch.cuda.get_rng_state())] if torch.cuda.is_available() else []
    return {"torch": _b64(torch.get_rng_state()), "cuda": cuda,
            "python": {"version": version, "internal": list(internal), "gauss_next": gauss},
            "numpy": {"algorithm": str(algorithm), "keys": [int(k) for k in keys], "position": int(position),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}}


def snapshot_tensors(snapshot: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The torch/CUDA states of a snapshot as uint8 tensors (for a safetensors file)."""
    out = {"torch": _from_b64(snapshot["torch"])}
    for i, state in enumerate(snapshot.get("cuda", [])):
        out[f"cuda/{i}"] = _from_b64(state)
    return out
