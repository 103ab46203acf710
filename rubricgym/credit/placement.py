"""Per-step advantages placed on tokens: the one placement rule every trainer uses.

An estimator gives one value per step; training needs one per token. ``token_advantages``
puts step t's value on the tokens of its *action* span (``trca*``: the reasoning, the
prompt and the observations carry none) or of its whole *response* (``grpo``, ``draco*``),
and 0 with a False mask everywhere else. ``StepTokens`` says where a step's tokens are in a
sequence: per step (rubricgym's trainer: each step is its own prompt + response) or inside
one multi-turn completion (TRL: model tokens of every step in one sequence).

Shapes: ``values`` ``[T]`` (one per step), ``steps`` ``T`` spans, result two arrays
``[length]`` (advantages float64, mask bool).

>>> steps = [StepTokens(response=(0, 6), action=(3, 5)), StepTokens(response=(8, 12), action=None)]
>>> adv, mask = token_advantages("trca", [0.5, -1.0], steps, length=12)
>>> adv.tolist()
[0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
>>> token_advantages("grpo", [0.5, -1.0], steps, length=12)[0].tolist()[6:]
[0.0, 0.0, -1.0, -1.0, -1.0, -1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rubricgym.contract import Span
from rubricgym.credit.estimators import Estimator, get_estimator

__all__ = ["StepTokens", "token_advantages"]


@dataclass(frozen=True)
class StepTokens:
    """Where one step's tokens are, as ``[start, end)`` token positions in a sequence:
    ``response`` the step's whole response, ``action`` its parsed action (None: the response
    did not parse, so an action-placed estimator gives it no tokens), ``reasoning`` its
    reasoning (for the record: no estimator places credit there)."""

    response: Span
    action: Span | None = None
    reasoning: Span | None = None


def token_advantages(estimator: str | Estimator, values: Sequence[float], steps: Sequence[StepTokens],
                     length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, mask)`` over ``length`` tokens from one value per step, placed by the
    estimator's rule (``Estimator.placement``). Spans are clipped to the sequence."""
    est = estimator if isinstance(estimator, Estimator) else get_estimator(estimator)
    if len(values) != len(steps):
        raise ValueError(f"{len(values)} step values for {len(steps)} steps")
    advantages = np.zeros(length, dtype=np.float64)
    mask = np.zeros(length, dtype=bool)
    for value, step in zip(values, steps, strict=True):
        span = step.action if est.placement == "action" else step.response
        if span is None:
            continue
        lo, hi = max(0, span[0]), min(length, span[1])
        if lo < hi:
            advantages[lo:hi] = float(value)
            mask[lo:hi] = True
    return advantages, mask
