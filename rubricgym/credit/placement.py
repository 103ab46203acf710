"""Per-step advantages placed on tokens: the one placement rule every trainer uses.

An estimator gives one value per step; training needs one per token. ``token_advantages``
puts step t's value on the tokens of its *action* span (``placement="action"``, the TRCA
estimators: the reasoning, the prompt and the observations carry none) or of its whole
*response* (``"response"``: GRPO, RLOO, GiGPO, DRACO), and 0 with a False mask everywhere
else. An estimator's placement is ``ResolvedEstimator.placement``. ``StepTokens`` says where a step's tokens are in a
sequence: per step (rubricgym's trainer: each step is its own prompt + response) or inside
one multi-turn completion (TRL: model tokens of every step in one sequence).

Shapes: ``values`` ``[T]`` (one per step), ``steps`` ``T`` spans, result two arrays
``[length]`` (advantages float64, mask bool).

>>> steps = [StepTokens(response=(0, 6), action=(3, 5)), StepTokens(response=(8, 12), action=None)]
>>> adv, mask = token_advantages("action", [0.5, -1.0], steps, length=12)
>>> adv.tolist()
[0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
>>> token_advantages("response", [0.5, -1.0], steps, length=12)[0].tolist()[6:]
[0.0, 0.0, -1.0, -1.0, -1.0, -1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Placement", "Span", "StepTokens", "token_advantages"]

Placement = Literal["action", "response"]
Span = tuple[int, int]  # [start, end) token positions

@dataclass(frozen=True)
class StepTokens:
    """Where one step's tokens are, as ``[start, end)`` token positions in a sequence:
    ``response`` the step's whole response, ``action`` its parsed action (None: the response
    did not parse, so an action-placed estimator gives it no tokens), ``reasoning`` its
    reasoning (for the record: no estimator places credit there)."""

    response: Span
    action: Span | None = None
    reasoning: Span | None = None


def token_advantages(placement: Placement, values: Sequence[float], steps: Sequence[StepTokens],
                     length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, mask)`` over ``length`` tokens from one value per step, on each step's
    action span (``"action"``) or whole response (``"response"``). Spans are clipped to the
    sequence."""
    if placement not in ("action", "response"):
        raise ValueError(f"placement must be 'action' or 'response', got {placement!r}")
    if len(values) != len(steps):
        raise ValueError(f"{len(values)} step values for {len(steps)} steps")
    advantages = np.zeros(length, dtype=np.float64)
    mask = np.zeros(length, dtype=bool)
    for value, step in zip(values, steps, strict=True):
        span = step.action if placement == "action" else step.response
        if span is None:
            continue
        lo, hi = max(0, span[0]), min(length, span[1])
        if lo < hi:
            advantages[lo:hi] = float(value)
            mask[lo:hi] = True
    return advantages, mask
