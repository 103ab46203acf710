"""A multi-turn episode kept as one completion (TRL style), and its per-token credit.

An ``Episode`` is what the rollout leaves per prompt row: where each step's response, reasoning
and action sit in the one completion, the step's reward records, the observation it acted on,
the outcome and the group key. Adaptation and placement only: an ``EpisodeStep`` is a
``rubricgym.estimators.CreditStep``, so the per-step values come from the one computation every
caller uses (``group_step_values``) and are placed by the one rule,
``rubricgym.credit.token_advantages``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rubricgym.contract import Span, Trajectory
from rubricgym.credit import DEFAULT_EPS, StepTokens, token_advantages
from rubricgym.estimators import CreditRollout, JudgeForCredit, ResolvedEstimator, group_step_values, resolve_estimator

__all__ = ["Episode", "EpisodeStep", "Processes", "completion_advantages", "credit_rollout", "group_episodes"]


@dataclass
class EpisodeStep:
    """One policy decision inside the completion: token spans (completion positions), the
    env's rewards, the rubric's records (``info["rubric"]``) and the observation it acted on
    (``anchor``; None in episodes recorded before it was kept)."""

    response: Span
    action: Span | None
    reasoning: Span | None
    env_reward: float
    reward: float
    context_key: str
    info: dict[str, Any] = field(default_factory=dict)
    anchor: str | None = None

    @property
    def tokens(self) -> StepTokens:
        return StepTokens(response=tuple(self.response), action=_span(self.action),  # type: ignore[arg-type]
                          reasoning=_span(self.reasoning))

    @property
    def response_length(self) -> int:
        return int(self.response[1]) - int(self.response[0])


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
            raise ValueError(f"one group holds episodes of different tasks/seeds {sorted(keys)}: the rows must come "
                             "in TRL's order, each group's num_generations copies of one row in a row")
    return groups


@dataclass(frozen=True)
class Processes:
    """This process among the processes that share one batch (TRL under ``accelerate launch``):
    its ``index``, their ``count``, and ``gather`` (accelerate's ``gather_object``: every
    process's list, concatenated in process order, returned on every process). Process ``p``
    holds the batch's rows ``p*n .. (p+1)*n - 1``, so a group may straddle two processes."""

    index: int
    count: int
    gather: Callable[[list[Any]], list[Any]]


def credit_rollout(episode: Episode) -> CreditRollout:
    """An episode as credit reads it (with its trajectory, which a DRACO judge reads)."""
    trajectory = Trajectory.from_json_line(str(episode.trajectory)) if episode.trajectory is not None else None
    return CreditRollout(episode.steps, episode.success, trajectory, f"task {episode.task_id}")


def _step_values(resolved: ResolvedEstimator, episodes: Sequence[Episode], group_size: int,
                 judge: JudgeForCredit | None, training_step: int) -> list[np.ndarray]:
    """Per episode its per-step values, per group from ``group_step_values``; a judge's
    verdicts are kept on the episodes."""
    values: list[np.ndarray] = []
    for group in group_episodes(episodes, group_size):
        credit = group_step_values(resolved, [credit_rollout(e) for e in group], judge=judge,
                                   training_step=training_step)
        for k, (episode, per_step) in enumerate(zip(group, credit.values, strict=True)):
            if credit.verdicts is not None:
                episode.judge = credit.verdicts[k]
            values.append(np.asarray(per_step, dtype=np.float64))
    return values


def _shared_step_values(resolved: ResolvedEstimator, episodes: Sequence[Episode], group_size: int,
                        judge: JudgeForCredit | None, training_step: int, processes: Processes) -> list[np.ndarray]:
    """The per-step values of this process's rows when the batch is spread over processes: the
    episodes are gathered, each group is computed once, by the process holding its first row
    (so a judge sees it once), and the values are gathered back; every row then has the values
    a single process computing the whole batch gives it."""
    everyone: list[Episode] = processes.gather(list(episodes))
    n = len(episodes)
    if len(everyone) != n * processes.count:
        raise ValueError(f"the processes hold different numbers of rows ({len(everyone)} in all, {n} here, "
                         f"{processes.count} processes): TRL gives each process per_device_train_batch_size rows")
    groups = group_episodes(everyone, group_size)
    first = processes.index * n
    owned = [g for g in range(len(groups)) if first <= g * group_size < first + n]
    mine = [e for g in owned for e in groups[g]]
    computed = _step_values(resolved, mine, group_size, judge, training_step)
    rows = [(owned[j // group_size] * group_size + j % group_size, values, mine[j].judge)
            for j, values in enumerate(computed)]
    shared = {row: (values, verdicts) for row, values, verdicts in processes.gather(rows)}
    out = []
    for i, episode in enumerate(episodes):
        values, verdicts = shared[first + i]
        if verdicts is not None:
            episode.judge = verdicts
        out.append(values)
    return out


def completion_advantages(estimator: str | ResolvedEstimator, episodes: Sequence[Episode], group_size: int,
                          length: int, *, gamma: float | None = None, lam: float | None = None,
                          eps: float = DEFAULT_EPS, judge: JudgeForCredit | None = None,
                          training_step: int = 0, processes: Processes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(advantages, mask)``, each ``[len(episodes), length]``: per group, the estimator's
    per-step values (``group_step_values``: the values rubricgym's trainer computes; a DRACO
    estimator's from the ``judge``'s verdicts on the group's trajectories) placed on every
    step's tokens of each completion by ``token_advantages``. ``estimator``: resolved, or a
    name resolved here with ``gamma``, ``lam`` and ``eps``. With ``processes`` the episodes are
    this process's rows of a batch spread over several processes (groups may straddle two):
    each row gets the values the whole batch on one process gives it."""
    resolved = estimator if isinstance(estimator, ResolvedEstimator) else resolve_estimator(
        estimator, gamma=gamma, lam=lam, eps=eps)
    if processes is None or processes.count == 1:
        values = _step_values(resolved, episodes, group_size, judge, training_step)
    else:
        values = _shared_step_values(resolved, episodes, group_size, judge, training_step, processes)
    advantages = np.zeros((len(episodes), length), dtype=np.float64)
    mask = np.zeros((len(episodes), length), dtype=bool)
    for row, (episode, per_step) in enumerate(zip(episodes, values, strict=True)):
        advantages[row], mask[row] = token_advantages(resolved.placement, [float(v) for v in per_step],
                                                      [s.tokens for s in episode.steps], length)
    return advantages, mask
