"""A multi-turn episode kept as one completion (TRL style), and its per-token credit.

An ``Episode`` is what the rollout leaves per prompt row: where each step's response, reasoning
and action sit in the one completion, the step's reward records, the outcome and the group key.
Its steps carry what ``rubricgym.records`` reads (``info``, ``env_reward``, ``context_key``), so
the per-step values come from the public estimator dispatch
(``rubricgym.credit.group_step_advantages``: the formulas rubricgym's trainer calls) and are
placed by the one public rule, ``rubricgym.credit.token_advantages``: nothing here computes
credit itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rubricgym.contract import Span, Trajectory
from rubricgym.credit import (
    DEFAULT_EPS,
    RolloutSignals,
    StepTokens,
    get_estimator,
    group_step_advantages,
    token_advantages,
)
from rubricgym.records import MissingRecord, rollout_signals, trca_gamma

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
    trajectory: str | None = None  # the env's Trajectory as JSON (what a DRACO judge reads)
    judge: dict[str, Any] | None = None  # the judge's verdicts behind a DRACO estimator's a_j

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


def _signals(episode: Episode, signal: str) -> RolloutSignals:
    """What the estimator reads from one episode: its steps' TRCA records (``trca*``), else
    only the engine's rewards."""
    if signal == "trca":
        try:
            return rollout_signals(episode.steps, f"task {episode.task_id}:", outcome=episode.env_return)
        except MissingRecord as exc:
            raise ValueError(f"{exc}; the 'trca' estimators need the env's TRCA reward wrapper "
                             "(rubricgym_rollout_func(env_id, reward='default') with an operator library)") from exc
    n = len(episode.steps)
    return RolloutSignals(r_f=[0.0] * n, r_b=[0.0] * n, env_rewards=[s.env_reward for s in episode.steps],
                          context_keys=[s.context_key for s in episode.steps], outcome=episode.env_return)


def _judged(group: Sequence[Episode], variant: str, judge: Any, training_step: int) -> list[np.ndarray]:
    """A DRACO estimator's per-step values for one group, from the judge's one group-to-credit
    step (``DracoJudge.group_step_credit``, as rubricgym's trainer calls it); each episode keeps
    its verdicts in ``judge``."""
    if any(e.trajectory is None for e in group):
        raise ValueError("a DRACO estimator needs each episode's trajectory (rubricgym_rollout_func records it)")
    trajectories = [Trajectory.from_json_line(str(e.trajectory)) for e in group]
    tokens = [[s.response[1] - s.response[0] for s in e.steps] for e in group]
    values, records = judge.group_step_credit(trajectories, tokens, variant, training_step=training_step)
    for episode, record in zip(group, records, strict=True):
        episode.judge = record
    return values


def completion_advantages(estimator: str, episodes: Sequence[Episode], group_size: int, length: int, *,
                          gamma: float | None = None, lam: float | None = None,
                          eps: float = DEFAULT_EPS, judge: Any = None,
                          training_step: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, mask)``, each ``[len(episodes), length]``: per group, the estimator's
    per-step values (``group_step_advantages``, with the trainer's gamma rule: the operator
    library's unless ``gamma`` is given; for the DRACO estimators the ``judge``'s verdicts on the
    group's trajectories) placed on every step's tokens of each completion by
    ``token_advantages``."""
    est = get_estimator(estimator)
    if est.signal == "judge" and judge is None:
        raise ValueError(f"estimator {estimator!r} needs a DRACO judge: pass judge=DracoJudge(...) "
                         "(rubricgym.judges), or use 'grpo' or 'trca*'")
    advantages = np.zeros((len(episodes), length), dtype=np.float64)
    mask = np.zeros((len(episodes), length), dtype=bool)
    row = 0
    for group in group_episodes(episodes, group_size):
        if est.signal == "judge":
            per_step = _judged(group, str(est.draco_variant), judge, training_step)
        else:
            signals = [_signals(e, est.signal) for e in group]
            library_gamma = trca_gamma(s for e in group for s in e.steps)
            per_step = group_step_advantages(est.name, signals, lam=lam, eps=eps,
                                             gamma=gamma if gamma is not None else library_gamma)
        for episode, values in zip(group, per_step, strict=True):
            advantages[row], mask[row] = token_advantages(est, [float(v) for v in values],
                                                          [s.tokens for s in episode.steps], length)
            row += 1
    return advantages, mask
