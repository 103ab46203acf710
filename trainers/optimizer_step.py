"""One optimizer step over several micro-batch backward passes, as the update sees it.

The update (trainers/update.py) forms each rank's share of the global loss; what happens to a
share's gradient depends on who owns the optimizer: torch itself (``TorchOptimizerStep``: the
model replicated, or sharded by FSDP) or DeepSpeed's ZeRO engine (``ZeroOptimizerStep`` in
trainers/zero.py). Both take the passes of one step in order, the last one flagged, and return
the global gradient norm before clipping.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from rubricgym.trainers.distributed import Ranks
from rubricgym.trainers.sharding import gradient_scale, norm_value


class OptimizerStep(Protocol):
    """``backward`` each pass's loss (``last`` on the step's final pass), then ``step``."""

    @property
    def module(self) -> Any:
        """What the training forward passes call (the model, or the engine wrapping it)."""

    def backward(self, loss: torch.Tensor, last: bool) -> None: ...

    def step(self) -> float:
        """Reduce, clip and step; the global gradient norm before clipping."""


class TorchOptimizerStep:
    """A torch optimizer. Replicated ranks sum their gradients in one all-reduce after the
    local passes; under FSDP the reduce-scatter in each backward has averaged them, so each
    rank's share is scaled by the number of ranks (``gradient_scale``)."""

    def __init__(self, model: Any, optimizer: torch.optim.Optimizer, ranks: Ranks, max_grad_norm: float):
        self.model, self.optimizer, self.ranks, self.max_grad_norm = model, optimizer, ranks, max_grad_norm
        self.params = [p for p in model.parameters() if p.requires_grad]

    @property
    def module(self) -> Any:
        return self.model

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        (loss * gradient_scale(self.ranks)).backward()

    def step(self) -> float:
        if not self.ranks.sharded:
            self.ranks.sum_gradients(self.params)  # each share carries global weights: the sum is the global gradient
        norm = norm_value(torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm))
        self.optimizer.step()
        return norm
