"""A multi-turn episode kept as one completion (TRL style), and its per-token credit.

An ``Episode`` is what the rollout leaves per prompt row: where each step's response, reasoning
and action sit in the one completion, the step's reward records, the outcome and the group key.
It duck-types the own trainer's ``Rollout`` (``steps`` with ``info``/``env_reward``/
``context_key``, ``env_return``, ``task_id``), so the per-step values come from the own
trainer's code (``rubricgym.trainers.advantages``) and are placed by the one public rule,
``rubricgym.credit.token_advantages``: nothing here computes credit itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rubricgym.contract import Span
from rubricgym.credit import StepTokens, get_estimator, token_advantages

__all__ = ["Episode", "EpisodeStep", "completion_advantages", "group_episodes"]


@dataclass
class EpisodeStep:
    """One policy decision inside the completion: token spans (completion positions), the
    env's rewards and the rubric's records (``info["rubric"]``)."""

    response: Span
    action: Span | None
    reasoning: Span | None
    env_reward: float
    reward: float
    context_key: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> StepTokens:
        return StepTokens(response=tuple(self.response), action=_span(self.action),  # type: ignore[arg-type]
                          reasoning=_span(self.reasoning))


def _span(span: Sequence[int] | None) -> Span | None:
    return None if span is None else (int(span[0]), int(span[1]))


@dataclass
class Episode:
    """One rubricgym episode played as one TRL completion. ``group_key`` (task and seed) is equal
    for the G rows of one group; ``truncated_by`` says why an unfinished episode stopped
    (``"max_steps"`` or ``"max_completion_length"``), None when the env ended it."""

    task_id: str
    seed: int
    group_key: str
    steps: list[EpisodeStep] = field(default_factory=list)
    success: bool | None = None
    truncated_by: str | None = None

    @property
    def env_return(self) -> float:
        return sum(s.env_reward for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (TRL hands extra rollout fields to reward functions; fixtures store it)."""
        return {**asdict(self), "env_return": self.env_return}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Episode:
        fields = {k: v for k, v in data.items() if k not in ("steps", "env_return")}
        return cls(**fields, steps=[EpisodeStep(**s) for s in data["steps"]])


def group_episodes(episodes: Sequence[Episode], group_size: int) -> list[list[Episode]]:
    """TRL's sampler repeats each row ``group_size`` times in a row: consecutive chunks are the
    groups. A chunk whose episodes do not share a group key cannot be one group."""
    if group_size < 1 or len(episodes) % group_size:
        raise ValueError(f"{len(episodes)} episodes do not split into groups of {group_size} (num_generations)")
    groups = [list(episodes[k: k + group_size]) for k in range(0, len(episodes), group_size)]
    for group in groups:
        keys = {e.group_key for e in group}
        if len(keys) != 1:
            raise ValueError(f"one group holds episodes of different tasks/seeds {sorted(keys)}: each process must "
                             "hold whole groups (per_device_train_batch_size a multiple of num_generations, "
                             "one process)")
    return groups


def completion_advantages(estimator: str, episodes: Sequence[Episode], group_size: int, length: int, *,
                          gamma: float | None = None, lam: float | None = None, eps: float = 1e-6,
                          judge: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, mask)``, each ``[len(episodes), length]``: the estimator's per-step values
    (computed by the own trainer's group functions) placed on every step's tokens of each
    completion by ``token_advantages``."""
    from rubricgym.trainers.advantages import grpo_group, trca_group

    est = get_estimator(estimator)
    if est.signal == "judge":
        raise ValueError(f"estimator {estimator!r} needs a DRACO judge, which the TRL integration does not "
                         "wire yet: use 'grpo' or 'trca*' here, or rubricgym's own trainer for DRACO")
    advantages = np.zeros((len(episodes), length), dtype=np.float64)
    mask = np.zeros((len(episodes), length), dtype=bool)
    row = 0
    for group in group_episodes(episodes, group_size):
        if est.signal == "outcome":
            per_step = grpo_group(group, eps)  # type: ignore[arg-type]
        else:
            per_step = trca_group(group, est.lam if est.lam is not None else lam, gamma, eps)  # type: ignore[arg-type]
        for episode, values in zip(group, per_step, strict=True):
            advantages[row], mask[row] = token_advantages(est, [float(v) for v in values],
                                                          [s.tokens for s in episode.steps], length)
            row += 1
    return advantages, mask
