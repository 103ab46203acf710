"""The KL term's reference policy: the policy RL starts from (docs/design.md §6).

Without a warm start that is the base model, the LoRA adapter off (no copy needed). A warm
start trains that same adapter, so afterwards the base is the model that never learnt the
action format; the reference is then the warm-started adapter, whose tensors are kept aside
here (LoRA: a few MB) and put in place for the reference's no-grad pass. Checkpoints carry
them (``state``), so a resumed run keeps the same reference.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from peft import get_peft_model_state_dict

from rubricgym.trainers.parallel.base import ParallelStrategy


def adapter_disabled(model: Any) -> contextlib.AbstractContextManager[Any]:
    """The frozen base model: peft's ``disable_adapter()``; a plain model is its own base."""
    fn = getattr(model, "disable_adapter", None)
    return fn() if fn is not None else contextlib.nullcontext()


def trainable(model: Any) -> list[torch.Tensor]:
    """The parameters RL trains (the adapter's), in ``named_parameters`` order."""
    return [p for p in model.parameters() if p.requires_grad]


class KLReference:
    """The base model until ``capture``/``adopt`` names the adapter's current weights."""

    def __init__(self) -> None:
        self._local: list[torch.Tensor] | None = None  # this rank's tensors, laid out as the parameters hold them
        self.state: dict[str, torch.Tensor] | None = None  # whole tensors by peft's saved keys (the checkpoint's)

    @property
    def is_base(self) -> bool:
        return self._local is None

    def capture(self, model: Any, parallel: ParallelStrategy) -> None:
        """The adapter as it is now becomes the reference (after the warm start). A collective
        when the strategy partitions the adapter: every rank calls it."""
        full = parallel.full_adapter_state()
        state = get_peft_model_state_dict(model, state_dict=full) if full is not None else get_peft_model_state_dict(model)
        self.state = {k: v.detach().cpu().clone().contiguous() for k, v in state.items()}
        self._local = [p.detach().clone() for p in trainable(model)]

    def adopt(self, model: Any, state: Mapping[str, torch.Tensor]) -> None:
        """The reference a checkpoint saved, already loaded into ``model``'s adapter (resume):
        no collective, so each rank can restore on its own."""
        self.state = {k: v.detach().cpu().clone().contiguous() for k, v in state.items()}
        self._local = [p.detach().clone() for p in trainable(model)]

    @contextlib.contextmanager
    def applied(self, model: Any, parallel: ParallelStrategy) -> Iterator[None]:
        """Inside: ``model`` computes the reference policy; after: the policy again, exactly."""
        if self._local is None:
            with adapter_disabled(model):
                yield
            return
        with parallel.parameters_held_at(trainable(model), self._local):
            yield
