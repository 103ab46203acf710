"""What a report shows about trajectories: typed views of steps, rollouts and groups.

A group is the G rollouts of one task from one initial state (a trainer iteration's group,
or equal ``(task_id, seed)`` in a plain file). Per step: the action, an excerpt of the
observation, the facts that changed, the TRCA operators that fired by category, r_F, r_B,
the advantage parts A_E / A_S (computed with ``rubricgym.credit`` from the stored signals),
the judge's criteria that cite the step, and the advantage the trajectory stored (what the
trainer put on the step's tokens), which the heat maps show.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from rubricgym.contract import Trajectory
from rubricgym.credit.trca import episode_advantages
from rubricgym.estimators import (MissingCreditInput, OutcomeRule, group_step_values, outcome_rewards,
                                  resolve_estimator, trajectory_rollout)
from rubricgym.records import JudgeRecord, TRCARecord, read_component, step_records
from rubricgym.report.categories import operator_categories

OBSERVATION_CHARS = 240
RESPONSE_CHARS = 400
FACT_CHARS = 80


# control characters (a random policy emits them) are shown as their Unicode pictures
CONTROL_PICTURES = {c: 0x2400 + c for c in range(32) if chr(c) not in "\t\n"} | {127: 0x2421}


def visible(text: Any) -> str:
    return ("" if text is None else str(text)).translate(CONTROL_PICTURES)


def excerpt(text: Any, limit: int) -> str:
    text = visible(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class CreditSettings(BaseModel):
    """How A_E / A_S are recomputed: the run's estimator and its parameters."""

    estimator: str = "trca"
    gamma: float | None = Field(None, description="None: the operator library's (its records carry it)")
    lam: float | None = None
    outcome: OutcomeRule | None = None
    eps: float = 1e-6


class Citation(BaseModel):
    criterion: str
    verdict: str


class TokenCredit(BaseModel):
    text: str
    advantage: float | None = None


class StepView(BaseModel):
    index: int
    action: str = ""
    response: str = ""
    parse_error: str | None = None
    observation: str = ""
    facts_changed: dict[str, str] = Field(default_factory=dict)
    fired: dict[str, list[str]] = Field(default_factory=dict, description="category -> operator ids")
    r_f: float | None = None
    r_b: float | None = None
    r_trca: float | None = None
    env_reward: float = 0.0
    a_e: float | None = None
    a_s: float | None = None
    advantage: float | None = Field(None, description="the advantage stored with the trajectory")
    tokens: list[TokenCredit] | None = None
    citations: list[Citation] = Field(default_factory=list)
    error: str | None = None


class CriterionRow(BaseModel):
    id: str
    text: str = ""
    verdict: str
    steps: list[int] = Field(default_factory=list)
    reason: str = ""


class RolloutView(BaseModel):
    label: str
    task_id: str
    seed: int | None = None
    success: bool | None = None
    error: str | None = None
    steps: list[StepView]
    judge_reward: float | None = None
    criteria: list[CriterionRow] = Field(default_factory=list)


class GroupView(BaseModel):
    key: str
    title: str
    instruction: str = ""
    rollouts: list[RolloutView]
    credit_note: str = ""
    advantage_source: str = Field("stored", description="'stored' (the trainer's) or computed from A_E + A_S")
    max_abs_advantage: float = 0.0

    @property
    def num_steps(self) -> int:
        return max((len(r.steps) for r in self.rollouts), default=0)


# -- steps -----------------------------------------------------------------------------------
def _fact_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    elif isinstance(value, dict):
        value = json.dumps(value, sort_keys=True, default=str)
    return excerpt(value, FACT_CHARS)


def _changed_facts(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, str]:
    """Facts whose value differs from the previous step's; a value merely cleared (an empty
    list or string, None) is not news and is left out."""
    return {k: _fact_text(v) for k, v in current.items()
            if previous.get(k) != v and (isinstance(v, (bool, int, float)) or v)}


def page_text(observation: str, instruction: str) -> str:
    """The observation without the task instruction that some benchmarks reprint at the top of
    every page (WebShop's "Instruction: [SEP] ..."): the excerpt shows what changed."""
    if len(instruction) < 16:
        return observation
    at = observation.find(instruction, 0, len(instruction) + 200)
    if at == -1:
        return observation
    rest = observation[at + len(instruction):]
    while True:  # separators between the header and the page
        stripped = rest.lstrip(" \t\n:|-").removeprefix("[SEP]")
        if stripped == rest:
            break
        rest = stripped
    return "… " + rest if rest else observation


def _fired(record: TRCARecord | None, categories: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for op_id, value in (record.judgments if record is not None else {}).items():
        if value:
            out[categories.get(op_id, "operators")].append(op_id)
    return dict(out)


def _float_or_none(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if np.isfinite(out) else None


def _stored_step_values(meta: Mapping[str, Any], key: str, n: int) -> list[float | None]:
    values = meta.get(key)
    if not isinstance(values, list):
        return [None] * n
    out = [_float_or_none(v) for v in values[:n]]
    return out + [None] * (n - len(out))


def _stored_tokens(meta: Mapping[str, Any], n: int) -> list[list[TokenCredit] | None]:
    values = meta.get("token_advantages")
    out: list[list[TokenCredit] | None] = [None] * n
    if not isinstance(values, list):
        return out
    for t, tokens in enumerate(values[:n]):
        if isinstance(tokens, list):
            out[t] = [TokenCredit(text=visible(item[0]), advantage=_float_or_none(item[1]))
                      for item in tokens if isinstance(item, (list, tuple)) and len(item) == 2]
    return out


def _judge_rows(trajectory: Trajectory) -> tuple[float | None, list[CriterionRow]]:
    """The judge's verdicts for this rollout: the last transition that carries a record (a
    judge reward wrapper), else the record a trainer stored in ``meta["judge"]`` (DRACO)."""
    records = chain((_judge_record(t.info) for t in reversed(trajectory.transitions)),
                    [_stored_judge(trajectory.meta.get("judge"))])  # lazily: the first found wins
    for record in records:
        if record is None or record.pending:
            continue
        rows = []
        for v in record.verdicts:
            cid = str(v.get("criterion_id", v.get("id", "?")))
            steps = [int(s) for s in v.get("steps") or [] if isinstance(s, (int, float))]
            rows.append(CriterionRow(id=cid, text=record.criteria.get(cid, ""), verdict=str(v.get("verdict", "?")),
                                     steps=steps, reason=excerpt(v.get("reason", ""), 300)))
        return record.reward, rows
    return None, []


def _judge_record(info: Mapping[str, Any]) -> JudgeRecord | None:
    return step_records(info, strict=False).judge()


def _stored_judge(stored: Any) -> JudgeRecord | None:
    """The judge record a trainer stored in ``meta["judge"]`` (DRACO), if it reads as one."""
    if not isinstance(stored, Mapping):
        return None
    try:
        record = read_component("judge", stored)
    except ValueError:
        return None
    return record if isinstance(record, JudgeRecord) else None


def rollout_view(trajectory: Trajectory, label: str) -> RolloutView:
    n = trajectory.num_steps
    stored = _stored_step_values(trajectory.meta, "step_advantages", n)
    tokens = _stored_tokens(trajectory.meta, n)
    judge_reward, criteria = _judge_rows(trajectory)
    cited: dict[int, list[Citation]] = defaultdict(list)
    for row in criteria:
        for s in row.steps:
            cited[s].append(Citation(criterion=row.id, verdict=row.verdict))
    steps = []
    previous: dict[str, Any] = {}
    for t, tr in enumerate(trajectory.transitions):
        facts = tr.facts.model_dump(mode="json")
        changed = _changed_facts(previous, facts) if t else {
            k: _fact_text(v) for k, v in tr.facts.model_dump(mode="json", exclude_defaults=True).items()}
        previous = facts
        record = step_records(tr.info, strict=False).trca()
        categories = operator_categories(record.library, trajectory.benchmark) if record is not None else {}
        steps.append(StepView(
            index=tr.step, action=excerpt(tr.action.action or "", RESPONSE_CHARS),
            response=excerpt(tr.response, RESPONSE_CHARS),
            parse_error=None if tr.action.ok else (tr.action.error.value if tr.action.error else "unparsed"),
            observation=excerpt(page_text(tr.observation, trajectory.instruction), OBSERVATION_CHARS),
            facts_changed=changed,
            fired=_fired(record, categories),
            r_f=record.r_F if record is not None else None,
            r_b=record.r_B if record is not None else None,
            r_trca=record.r_TRCA if record is not None else None,
            env_reward=tr.env_reward, advantage=stored[t], tokens=tokens[t],
            citations=cited.get(tr.step, []), error=tr.error,
        ))
    error = trajectory.meta.get("error")
    return RolloutView(label=label, task_id=trajectory.task_id, seed=trajectory.seed,
                       success=trajectory.outcome.success, error=None if error is None else excerpt(error, 300),
                       steps=steps, judge_reward=judge_reward, criteria=criteria)


# -- credit ----------------------------------------------------------------------------------
def add_credit(rollouts: list[RolloutView], trajectories: Sequence[Trajectory], settings: CreditSettings) -> str:
    """Recompute every step's advantage through the trainer's own path (``group_step_values``),
    split into A_E and A_S where the estimator is A_E + A_S; returns a note on how."""
    try:
        estimator = resolve_estimator(settings.estimator, gamma=settings.gamma, lam=settings.lam, eps=settings.eps,
                                      outcome=settings.outcome)
    except ValueError as exc:
        return f"A_E / A_S: {exc}"
    if estimator.judge_variant is not None:
        return f"A_E / A_S: not recomputed for '{estimator.name}' (it needs the judge's verdicts)"
    group = [trajectory_rollout(t) for t in trajectories]
    try:
        credit = group_step_values(estimator, group)
        _, outcomes = outcome_rewards(estimator, group)
    except MissingCreditInput as exc:
        return f"A_E / A_S: {exc}"
    a_e = episode_advantages(outcomes, estimator.eps) if estimator.episode_term else np.zeros(len(group))
    for r, episode, total in zip(rollouts, a_e, credit.values, strict=True):
        for s, value in zip(r.steps, total, strict=True):
            s.a_e, s.a_s = float(episode), float(value - episode)
    used = credit.estimator
    lam = "the paid r_TRCA" if used.lam is None else f"λ={used.lam:g}"
    split = "A_E, A_S" if used.episode_term else "A (shown as A_S: no episode term)"
    return f"{split} recomputed: estimator {used.name}, γ={used.gamma:g} ({used.sources['gamma']}), {lam}"


def group_view(key: str, title: str, trajectories: Sequence[Trajectory], settings: CreditSettings) -> GroupView:
    rollouts = []
    for k, traj in enumerate(trajectories):
        member = traj.meta.get("member", k) if isinstance(traj.meta, Mapping) else k
        rollouts.append(rollout_view(traj, f"rollout {member}"))
    try:
        note = add_credit(rollouts, trajectories, settings)
    except ValueError as exc:  # inconsistent stored signals: shown, not fatal
        note = f"A_E / A_S not computed: {exc}"
    source = "stored"
    if all(s.advantage is None for r in rollouts for s in r.steps):
        # a plain file stores none: show the computed A = A_E + A_S instead, and say so
        source = "computed (A_E + A_S)"
        for r in rollouts:
            for s in r.steps:
                if s.a_e is not None and s.a_s is not None:
                    s.advantage = s.a_e + s.a_s
    values = [abs(s.advantage) for r in rollouts for s in r.steps if s.advantage is not None]
    values += [abs(t.advantage) for r in rollouts for s in r.steps for t in s.tokens or [] if t.advantage is not None]
    instruction = excerpt(trajectories[0].instruction if trajectories else "", 600)
    return GroupView(key=key, title=title, instruction=instruction,
                     rollouts=rollouts, credit_note=note, advantage_source=source,
                     max_abs_advantage=max(values, default=0.0))


def group_trajectories(trajectories: Sequence[Trajectory],
                       by_task: bool = False) -> dict[tuple[Any, ...], list[Trajectory]]:
    """Rollouts of one group together: the trainer's (iteration, group), else (task, seed);
    ``by_task``: every rollout of a task (an eval's K samples, each with its own seed)."""
    groups: dict[tuple[Any, ...], list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        meta = traj.meta if isinstance(traj.meta, Mapping) else {}
        if by_task:
            key: tuple[Any, ...] = ("task", traj.task_id, None)
        elif "group" in meta:
            key = ("iteration", meta.get("iteration"), meta.get("group"), traj.task_id)
        else:
            key = ("task", traj.task_id, traj.seed)
        groups[key].append(traj)
    for members in groups.values():
        members.sort(key=lambda t: t.meta.get("member", 0) if isinstance(t.meta, Mapping) else 0)
    return dict(groups)
