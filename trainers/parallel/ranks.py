"""This process's place among several training processes (``torchrun`` / ``accelerate launch``)
and the hand-written collectives the trainer needs, on plain tensors and JSON (nothing is
pickled). With one process (no ``WORLD_SIZE``, or 1) every operation is the identity, so
one-process results are unchanged.

Why hand-written: the trainer exchanges a few counts, JSON records and one flat gradient
tensor; each collective below says what it is for. A collective that fails (a peer died, or
none answered within ``run.collective_timeout_s``) raises ``RankFailure``, so a surviving
rank stops with a clear error instead of hanging.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

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
    grouped: bool = False  # a process group exists (also of one process: a partitioning engine can run on it)
    failed: bool = False

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


def init_ranks(timeout_s: float, cuda: bool) -> Ranks:
    """The process group from the launcher's environment (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``: torchrun and accelerate set them);
    gloo on CPU, nccl on CUDA, collectives time out after ``timeout_s``. Reuses a group that
    the caller (e.g. ``accelerate.Accelerator``) already initialised."""
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
    return Ranks(rank=rank, world_size=world, local_rank=local, device=device, timeout_s=timeout_s, owns_group=owns,
                 grouped=True)
