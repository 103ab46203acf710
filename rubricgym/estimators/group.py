"""One computation of per-step values for a group, from one small step protocol.

Every caller hands over the same thing: a group of ``CreditRollout`` (G rollouts of one task
from one initial state), each a sequence of steps that provide ``CreditStep`` — the engine's
reward, the benchmark's context key, the step's ``info`` (its rubric records), the observation
it acted on (``anchor``) and its response's token count (``response_length``). The trainer's
``StepSample``, TRL's ``EpisodeStep`` and stored trajectories (``trajectory_rollout``) all
provide it. ``group_step_values`` reads what the resolved estimator needs into ``GroupInputs``
arrays (records through ``rubricgym.records``, the only reader of them), completes the
resolution with the records' gamma and lambda, and calls the estimator's pure computation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rubricgym.contract import Trajectory
from rubricgym.estimators.inputs import GroupInputs, MissingCreditInput, TRCAArrays
from rubricgym.estimators.resolve import ResolvedEstimator, resolve_estimator
from rubricgym.records import TRCARecord, step_records

__all__ = ["CreditRollout", "CreditStep", "GroupCredit", "JudgeForCredit", "TrajectoryStep", "group_inputs",
           "group_step_advantages", "group_step_values", "outcome_rewards", "trajectory_rollout"]


class CreditStep(Protocol):
    """What one step gives credit: the engine's reward, the context key, the step's ``info``
    (``info["rubric"]`` holds its reward records), the observation it acted on (None: not
    recorded) and the number of tokens of its response."""

    @property
    def env_reward(self) -> float: ...

    @property
    def context_key(self) -> str: ...

    @property
    def info(self) -> Mapping[str, Any]: ...

    @property
    def anchor(self) -> str | None: ...

    @property
    def response_length(self) -> int: ...


class JudgeForCredit(Protocol):
    """A DRACO judge (``rubricgym.judges.DracoJudge``): one group of trajectories in, per-step
    a_j and each rollout's verdict record out."""

    def group_step_credit(self, trajectories: Sequence[Trajectory], step_tokens: Sequence[Sequence[int]],
                          variant: str, training_step: int | None = None
                          ) -> tuple[list[np.ndarray], list[dict[str, Any]]]: ...


@dataclass(frozen=True)
class CreditRollout:
    """One rollout as credit reads it: its steps, whether it succeeded (None: unknown), its
    trajectory (what a judge reads) and a label for messages."""

    steps: Sequence[CreditStep]
    success: bool | None = None
    trajectory: Trajectory | None = None
    label: str = "rollout"


@dataclass(frozen=True)
class TrajectoryStep:
    """A stored transition as a ``CreditStep`` (its anchor is the observation before it)."""

    env_reward: float
    context_key: str
    info: Mapping[str, Any]
    anchor: str | None
    response_length: int = 0


def trajectory_rollout(trajectory: Trajectory, step_tokens: Sequence[int] | None = None) -> CreditRollout:
    """A stored trajectory as a ``CreditRollout``; ``step_tokens``: each step's response tokens
    (what DRACO's a_j divides by; default: the trajectory's ``meta["response_tokens"]``, else 0)."""
    transitions = trajectory.transitions
    tokens = list(step_tokens) if step_tokens is not None else trajectory.meta.get("response_tokens")
    if not isinstance(tokens, list) or len(tokens) != len(transitions):
        tokens = [0] * len(transitions)
    before = [trajectory.initial_observation, *(t.observation for t in transitions[:-1])]
    steps = [TrajectoryStep(float(t.env_reward), t.context_key, t.info, anchor, int(n))
             for t, anchor, n in zip(transitions, before, tokens, strict=False)]
    return CreditRollout(steps, trajectory.outcome.success, trajectory, f"trajectory {trajectory.task_id}")


def outcome_rewards(est: ResolvedEstimator, group: Sequence[CreditRollout]) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Each rollout's engine rewards and outcome under the resolved outcome rule: ``return`` =
    the summed engine reward; ``success`` = 1/0, also the only (terminal) engine reward."""
    rewards = [np.array([float(s.env_reward) for s in r.steps], dtype=np.float64) for r in group]
    if est.outcome == "return":
        return tuple(rewards), np.array([float(r.sum()) for r in rewards], dtype=np.float64)
    binary = []
    for rollout, r in zip(group, rewards, strict=True):
        if rollout.success is None:
            raise MissingCreditInput(f"{rollout.label}: outcome 'success' needs each rollout's success (the env's "
                                     "trajectory outcome); it is unknown here")
        terminal = np.zeros_like(r)
        if terminal.size:
            terminal[-1] = float(bool(rollout.success))
        binary.append(terminal)
    return tuple(binary), np.array([float(bool(r.success)) for r in group], dtype=np.float64)


def _trca_records(group: Sequence[CreditRollout]) -> TRCAArrays:
    """The group's TRCA records; a step without one is an error (never guessed as zeros)."""
    per_rollout: list[list[TRCARecord]] = []
    for rollout in group:
        records = []
        for index, step in enumerate(rollout.steps):
            record = step_records(step.info).trca()
            if record is None:
                raise MissingCreditInput(f"{rollout.label} step {index} has no TRCA record: the TRCA estimators need "
                                         "the TRCA reward wrapper (gym.make(..., reward='default') with an operator "
                                         "library)")
            records.append(record)
        per_rollout.append(records)
    first = next((r for records in per_rollout for r in records), None)
    return TRCAArrays(
        r_f=tuple(np.array([r.r_F for r in rs], dtype=np.float64) for rs in per_rollout),
        r_b=tuple(np.array([r.r_B for r in rs], dtype=np.float64) for rs in per_rollout),
        r_trca=tuple(np.array([r.r_TRCA for r in rs], dtype=np.float64) for rs in per_rollout),
        gamma=first.gamma if first is not None else None, lam=first.lam if first is not None else None)


def _recorded_only(group: Sequence[CreditRollout]) -> TRCAArrays | None:
    """Only the gamma and lambda of the first TRCA record, for estimators that need no record."""
    for rollout in group:
        for step in rollout.steps:
            record = step_records(step.info).trca()
            if record is not None:
                return TRCAArrays((), (), (), record.gamma, record.lam)
    return None


def _anchors(group: Sequence[CreditRollout]) -> tuple[tuple[str, ...], ...]:
    anchors = []
    for rollout in group:
        if any(s.anchor is None for s in rollout.steps):
            raise MissingCreditInput(f"{rollout.label}: this estimator needs each step's observation (GiGPO's anchor "
                                     "state); the steps do not carry it")
        anchors.append(tuple(str(s.anchor) for s in rollout.steps))
    return tuple(anchors)


def _judged(est: ResolvedEstimator, group: Sequence[CreditRollout], judge: JudgeForCredit | None,
            training_step: int) -> tuple[tuple[np.ndarray, ...], list[dict[str, Any]]]:
    if judge is None:
        raise MissingCreditInput(f"estimator {est.name!r} needs a DRACO judge: pass judge=DracoJudge(...) "
                                 "(rubricgym.judges), or configure judge.config / judge.options for the trainer")
    trajectories = [r.trajectory for r in group]
    if any(t is None for t in trajectories):
        raise MissingCreditInput(f"estimator {est.name!r} needs each rollout's trajectory (what the judge reads)")
    tokens = [[int(s.response_length) for s in r.steps] for r in group]
    values, records = judge.group_step_credit(trajectories, tokens, str(est.judge_variant),  # type: ignore[arg-type]
                                              training_step=training_step)
    return tuple(np.asarray(v, dtype=np.float64) for v in values), records


def group_inputs(est: ResolvedEstimator, group: Sequence[CreditRollout], judge: JudgeForCredit | None = None,
                 training_step: int = 0) -> tuple[GroupInputs, list[dict[str, Any]] | None]:
    """The arrays ``est`` needs from one group (and a judge's verdict records, if one ran)."""
    env_rewards, outcomes = outcome_rewards(est, group)
    needs = est.needs
    judged, verdicts = _judged(est, group, judge, training_step) if "judge" in needs else (None, None)
    return GroupInputs(
        env_rewards=env_rewards, outcomes=outcomes,
        context_keys=tuple(tuple(str(s.context_key or "") for s in r.steps) for r in group),
        anchors=_anchors(group) if "anchors" in needs else None,
        trca=_trca_records(group) if "trca" in needs else _recorded_only(group),
        judged=judged,
    ), verdicts


@dataclass(frozen=True)
class GroupCredit:
    """One group's credit: per-step values (``[T_i]`` per rollout), the judge's verdict record per
    rollout when the estimator ran one (else None), and the estimator as bound to the group's
    records (the gamma and lambda actually used, with their sources)."""

    values: list[np.ndarray]
    verdicts: list[dict[str, Any]] | None
    estimator: ResolvedEstimator


def group_step_values(est: ResolvedEstimator, group: Sequence[CreditRollout], *, judge: JudgeForCredit | None = None,
                      training_step: int = 0) -> GroupCredit:
    """The per-step values of one group: the one computation every caller uses."""
    if not group:
        return GroupCredit([], None, est)
    inputs, verdicts = group_inputs(est, group, judge, training_step)
    trca = inputs.trca
    bound = est.bind_recorded(trca.gamma if trca else None, trca.lam if trca else None)
    values = bound.compute(inputs, bound.parameters)
    for rollout, v, n in zip(group, values, inputs.lengths, strict=True):
        if len(v) != n:
            raise ValueError(f"estimator {est.name!r} gave {len(v)} values for {rollout.label}'s {n} steps")
    return GroupCredit([np.asarray(v, dtype=np.float64) for v in values], verdicts, bound)


def group_step_advantages(estimator: str | ResolvedEstimator, rollouts: Sequence[Trajectory | CreditRollout], *,
                          gamma: float | None = None, lam: float | None = None, eps: float | None = None,
                          judge: JudgeForCredit | None = None) -> list[np.ndarray]:
    """Per-step advantages of one group of stored trajectories (or ``CreditRollout``s): the
    same values rubricgym's trainer and TRL's get. ``estimator`` is a name (resolved here with
    ``gamma``/``lam``/``eps``) or an already resolved one.

    >>> from rubricgym.contract import Facts, ParsedAction, Trajectory, Transition
    >>> def step(t, key, reward):
    ...     return Transition(step=t, response="", action=ParsedAction(ok=True), observation=f"o{t}",
    ...                       facts=Facts(), context_key=key, env_reward=reward)
    >>> won = Trajectory(benchmark="base", task_id="t", transitions=[step(0, "a", 0.0), step(1, "b", 1.0)])
    >>> lost = Trajectory(benchmark="base", task_id="t", transitions=[step(0, "a", 0.0), step(1, "c", 0.0)])
    >>> [a.round(2).tolist() for a in group_step_advantages("grpo", [won, lost])]
    [[1.0, 1.0], [-1.0, -1.0]]
    """
    if isinstance(estimator, ResolvedEstimator):
        if gamma is not None or lam is not None or eps is not None:
            raise ValueError("pass gamma/lam/eps to resolve_estimator, not with an already resolved estimator")
        resolved = estimator
    else:
        resolved = resolve_estimator(estimator, gamma=gamma, lam=lam, **({"eps": eps} if eps is not None else {}))
    group = [r if isinstance(r, CreditRollout) else trajectory_rollout(r) for r in rollouts]
    return group_step_values(resolved, group, judge=judge).values
