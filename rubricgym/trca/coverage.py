"""What an operator library does on stored trajectories: which operators fire where, what the
categories pay, and where two libraries disagree.

Used by ``rubricgym library test`` and ``rubricgym library diff``. Judging replays each
episode's stored facts through the compiled library exactly as the reward wrapper does
(one ``EpisodeJudge`` per episode, coverage carried step to step), so what this reports is
what training would have paid. An operator that never fires carries no signal on these
trajectories; one that fires on every step carries none either (it cannot tell steps
apart): both are flagged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from rubricgym.contract import Trajectory
from rubricgym.credit.trca import CATEGORIES, coverage, item_weights, trca_rewards
from rubricgym.trca.operators import CompiledLibrary

MAX_STEPS_LISTED = 20  # per operator, the first steps it fired on (the counts are complete)


class StepRef(BaseModel):
    """Step ``step`` (0-based) of episode ``episode`` (its index in the trajectory file)."""

    episode: int
    step: int

    def __str__(self) -> str:
        return f"{self.episode}:{self.step}"


class OperatorCoverage(BaseModel):
    id: str
    category: str
    fired_steps: int = Field(description="steps the operator fired on")
    fired_episodes: int = Field(description="episodes it fired in at least once")
    fire_rate: float = Field(description="fired_steps / all steps")
    errors: int = Field(0, description="steps where its condition raised (judged 0)")
    first_fired: list[StepRef] = Field(default_factory=list, description=f"the first {MAX_STEPS_LISTED} steps it fired on")
    flags: list[str] = Field(default_factory=list, description="never_fires / fires_every_step")


class CategoryStats(BaseModel):
    """What one category paid (its share of the foundational reward r_F)."""

    category: str
    operators: int
    step_mean: float
    step_min: float
    step_max: float
    episode_mean: float = Field(description="mean over episodes of the category's summed step rewards")
    steps_with_any: int = Field(description="steps where at least one of its operators fired")


class LibraryTestReport(BaseModel):
    library: str
    benchmark: str
    episodes: int
    steps: int
    operators: list[OperatorCoverage]
    categories: list[CategoryStats]
    r_f_mean: float
    r_b_mean: float
    r_trca_mean: float
    episode_return_mean: float = Field(description="mean over episodes of the summed r_TRCA")
    never_fire: list[str]
    always_fire: list[str]

    @property
    def flagged(self) -> list[str]:
        return self.never_fire + self.always_fire


class EpisodeJudgments(BaseModel):
    """One episode's judgments ``O[T, J]`` and TRCA step rewards under one library."""

    model_config = {"arbitrary_types_allowed": True}

    judgments: np.ndarray
    r_f: np.ndarray
    r_b: np.ndarray
    r_trca: np.ndarray
    errors: dict[str, int]


def _binding(trajectory: Trajectory, binding_model: type[BaseModel] | None) -> Mapping[str, Any]:
    """The stored binding, completed with the model's defaults when it validates."""
    if binding_model is None:
        return trajectory.binding
    try:
        return binding_model.model_validate(trajectory.binding).model_dump(mode="json")
    except ValidationError:
        return trajectory.binding


def judge_trajectory(compiled: CompiledLibrary, trajectory: Trajectory,
                     binding_model: type[BaseModel] | None = None) -> EpisodeJudgments:
    judge = compiled.episode(_binding(trajectory, binding_model))
    rows: list[np.ndarray] = []
    prior = np.zeros(compiled.num_operators)
    for transition in trajectory.transitions:
        row = judge.judge(transition.facts, prior)
        rows.append(row)
        prior = coverage(row[None, :], compiled.coverable, prior)[-1]
    o = np.array(rows, dtype=np.int8).reshape(len(rows), compiled.num_operators)
    b = compiled.library.budgets
    rewards = trca_rewards(o, compiled.categories, b.r_evi, b.r_inval, b.r_exec, compiled.library.lam)
    return EpisodeJudgments(judgments=o, r_f=rewards.r_f, r_b=rewards.r_b, r_trca=rewards.r_trca,
                            errors=dict(judge.errors))


def _stats(values: Sequence[float]) -> tuple[float, float, float]:
    if not len(values):
        return 0.0, 0.0, 0.0
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.min()), float(a.max())


def library_coverage(compiled: CompiledLibrary, trajectories: Sequence[Trajectory],
                 binding_model: type[BaseModel] | None = None) -> LibraryTestReport:
    """Per operator how often and where it fires, per category what it pays; flags the
    operators that never fire and those that fire on every step."""
    lib = compiled.library
    ids, cats = compiled.ids, list(compiled.categories)
    weights = item_weights(cats, lib.budgets.r_evi, lib.budgets.r_inval, lib.budgets.r_exec)
    fired = np.zeros(len(ids), dtype=np.int64)
    episodes_fired = np.zeros(len(ids), dtype=np.int64)
    errors = np.zeros(len(ids), dtype=np.int64)
    first: list[list[StepRef]] = [[] for _ in ids]
    per_cat_steps: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    per_cat_eps: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    cat_any = dict.fromkeys(CATEGORIES, 0)
    r_f: list[float] = []
    r_b: list[float] = []
    r_t: list[float] = []
    returns: list[float] = []
    for e, trajectory in enumerate(trajectories):
        ep = judge_trajectory(compiled, trajectory, binding_model)
        o = ep.judgments
        fired += o.sum(axis=0)
        episodes_fired += o.any(axis=0) if len(o) else 0
        for j, op_id in enumerate(ids):
            errors[j] += ep.errors.get(op_id, 0)
            if len(first[j]) < MAX_STEPS_LISTED:
                for t in np.flatnonzero(o[:, j])[: MAX_STEPS_LISTED - len(first[j])]:
                    first[j].append(StepRef(episode=e, step=int(t)))
        for c in CATEGORIES:
            mask = np.array([x == c for x in cats])
            pay = o[:, mask].astype(np.float64) @ weights[mask] if len(o) else np.zeros(0)
            per_cat_steps[c] += pay.tolist()
            per_cat_eps[c].append(float(pay.sum()))
            cat_any[c] += int(o[:, mask].any(axis=1).sum()) if len(o) else 0
        r_f += ep.r_f.tolist()
        r_b += ep.r_b.tolist()
        r_t += ep.r_trca.tolist()
        returns.append(float(ep.r_trca.sum()))
    steps = len(r_t)
    operators = []
    for j, op_id in enumerate(ids):
        flags = []
        if fired[j] == 0:
            flags.append("never_fires")
        elif fired[j] == steps:
            flags.append("fires_every_step")
        operators.append(OperatorCoverage(
            id=op_id, category=cats[j], fired_steps=int(fired[j]), fired_episodes=int(episodes_fired[j]),
            fire_rate=float(fired[j] / steps) if steps else 0.0, errors=int(errors[j]), first_fired=first[j],
            flags=flags))
    categories = []
    for c in CATEGORIES:
        mean, lo, hi = _stats(per_cat_steps[c])
        categories.append(CategoryStats(category=c, operators=cats.count(c), step_mean=mean, step_min=lo, step_max=hi,
                                        episode_mean=_stats(per_cat_eps[c])[0], steps_with_any=cat_any[c]))
    return LibraryTestReport(
        library=lib.name, benchmark=lib.benchmark, episodes=len(trajectories), steps=steps, operators=operators,
        categories=categories, r_f_mean=_stats(r_f)[0], r_b_mean=_stats(r_b)[0], r_trca_mean=_stats(r_t)[0],
        episode_return_mean=_stats(returns)[0],
        never_fire=[o.id for o in operators if "never_fires" in o.flags],
        always_fire=[o.id for o in operators if "fires_every_step" in o.flags])


def format_test_report(report: LibraryTestReport) -> str:
    lines = [f"library {report.library!r} ({report.benchmark}) on {report.episodes} episodes, {report.steps} steps"]
    for c in CATEGORIES:
        ops = [o for o in report.operators if o.category == c]
        lines.append(f"\n{c}")
        for o in ops:
            where = " ".join(str(s) for s in o.first_fired[:8]) + (" ..." if o.fired_steps > 8 else "")
            flag = f"  <- {', '.join(f.replace('_', ' ') for f in o.flags)}" if o.flags else ""
            err = f", {o.errors} errors" if o.errors else ""
            lines.append(f"  {o.id:<28} {o.fired_steps:>5} steps ({100 * o.fire_rate:5.1f}%) in {o.fired_episodes:>3} "
                         f"episodes{err}{flag}")
            if where:
                lines.append(f"  {'':<28} at episode:step {where}")
    lines.append("\nper-step reward by category (share of r_F): mean [min, max]; per episode mean")
    for s in report.categories:
        lines.append(f"  {s.category:<11} {s.step_mean:+.4f} [{s.step_min:+.4f}, {s.step_max:+.4f}]; "
                     f"{s.episode_mean:+.4f}; {s.steps_with_any} steps with a firing")
    lines.append(f"  r_F {report.r_f_mean:+.4f}  r_B {report.r_b_mean:+.4f}  r_TRCA {report.r_trca_mean:+.4f} per step; "
                 f"episode return {report.episode_return_mean:+.4f}")
    if report.never_fire:
        lines.append(f"never fire (no signal on these trajectories): {', '.join(report.never_fire)}")
    if report.always_fire:
        lines.append(f"fire on every step (no signal: they cannot tell steps apart): {', '.join(report.always_fire)}")
    if not report.flagged:
        lines.append("every operator fires on some steps and not on others")
    return "\n".join(lines)


# -- diff --------------------------------------------------------------------------------------
class OperatorChange(BaseModel):
    id: str
    a: int | None = Field(description="judgment under library A (None: A has no such operator)")
    b: int | None


class StepDisagreement(BaseModel):
    episode: int
    task_id: str
    step: int
    action: str
    r_trca_a: float
    r_trca_b: float
    changes: list[OperatorChange]


class LibraryDiff(BaseModel):
    library_a: str
    library_b: str
    episodes: int
    steps: int
    only_in_a: list[str]
    only_in_b: list[str]
    condition_changed: list[str] = Field(description="ids in both whose condition text differs")
    disagreeing_steps: int
    per_operator: dict[str, int] = Field(description="operator id -> steps whose judgment differs")
    return_a_mean: float
    return_b_mean: float
    steps_detail: list[StepDisagreement]


def diff_libraries(a: CompiledLibrary, b: CompiledLibrary, trajectories: Sequence[Trajectory],
                   binding_model: type[BaseModel] | None = None) -> LibraryDiff:
    """Every step where the two libraries judge differently (an operator only one library has
    counts as a difference where it fires) or pay a different r_TRCA."""
    cond_a = {op.id: " ".join(op.condition.split()) for op in a.library.operators}
    cond_b = {op.id: " ".join(op.condition.split()) for op in b.library.operators}
    ids = list(dict.fromkeys([*a.ids, *b.ids]))
    index_a = {i: j for j, i in enumerate(a.ids)}
    index_b = {i: j for j, i in enumerate(b.ids)}
    per_operator = dict.fromkeys(ids, 0)
    detail: list[StepDisagreement] = []
    steps = 0
    returns_a: list[float] = []
    returns_b: list[float] = []
    for e, trajectory in enumerate(trajectories):
        ja = judge_trajectory(a, trajectory, binding_model)
        jb = judge_trajectory(b, trajectory, binding_model)
        returns_a.append(float(ja.r_trca.sum()))
        returns_b.append(float(jb.r_trca.sum()))
        for t, transition in enumerate(trajectory.transitions):
            steps += 1
            changes = []
            for op_id in ids:
                va = int(ja.judgments[t, index_a[op_id]]) if op_id in index_a else None
                vb = int(jb.judgments[t, index_b[op_id]]) if op_id in index_b else None
                if va != vb and (va or vb):
                    changes.append(OperatorChange(id=op_id, a=va, b=vb))
                    per_operator[op_id] += 1
            ra, rb = float(ja.r_trca[t]), float(jb.r_trca[t])
            if changes or not np.isclose(ra, rb):
                action = transition.action.action if transition.action.ok else f"<{transition.action.error}>"
                detail.append(StepDisagreement(episode=e, task_id=trajectory.task_id, step=t, action=str(action)[:120],
                                               r_trca_a=ra, r_trca_b=rb, changes=changes))
    return LibraryDiff(
        library_a=a.library.name, library_b=b.library.name, episodes=len(trajectories), steps=steps,
        only_in_a=[i for i in a.ids if i not in index_b], only_in_b=[i for i in b.ids if i not in index_a],
        condition_changed=[i for i in a.ids if i in cond_b and cond_a[i] != cond_b[i]],
        disagreeing_steps=len(detail), per_operator={k: v for k, v in per_operator.items() if v},
        return_a_mean=_stats(returns_a)[0], return_b_mean=_stats(returns_b)[0], steps_detail=detail)


def format_diff(diff: LibraryDiff, limit: int = 50) -> str:
    lines = [f"A = {diff.library_a!r}, B = {diff.library_b!r} on {diff.episodes} episodes, {diff.steps} steps"]
    if diff.only_in_a:
        lines.append(f"only in A: {', '.join(diff.only_in_a)}")
    if diff.only_in_b:
        lines.append(f"only in B: {', '.join(diff.only_in_b)}")
    if diff.condition_changed:
        lines.append(f"condition changed: {', '.join(diff.condition_changed)}")
    if not diff.steps_detail:
        lines.append("the libraries agree on every step")
        return "\n".join(lines)
    lines.append(f"{diff.disagreeing_steps} step(s) differ; per operator: "
                 + ", ".join(f"{k} {v}" for k, v in diff.per_operator.items()))
    lines.append(f"episode return mean: A {diff.return_a_mean:+.4f}, B {diff.return_b_mean:+.4f}")
    for d in diff.steps_detail[:limit]:
        change = ", ".join(f"{c.id} {'-' if c.a is None else c.a}->{'-' if c.b is None else c.b}" for c in d.changes)
        lines.append(f"  episode {d.episode} ({d.task_id}) step {d.step} > {d.action}: r_TRCA {d.r_trca_a:+.4f} -> "
                     f"{d.r_trca_b:+.4f}" + (f"; {change}" if change else ""))
    if len(diff.steps_detail) > limit:
        lines.append(f"  ... {len(diff.steps_detail) - limit} more (--json for all)")
    return "\n".join(lines)
