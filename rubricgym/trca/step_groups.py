"""Which steps share a TRCA step group: the context keys of stored rollouts, per task group.

TRCA's step advantage (Eq. 18-19) standardizes a step's return against the other steps of
its task group with the same context key; a step alone in its group gets ``A_S = 0``. How
often keys repeat decides how much step credit there is, so ``rubricgym library test``
reports it: the share of steps in groups of two or more, and the largest groups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, Field

from rubricgym.contract import Trajectory

LARGEST_LISTED = 5


class StepGroup(BaseModel):
    task_id: str
    seed: int | None
    context_key: str
    steps: int = Field(description="steps of the task group with this key")
    rollouts: int = Field(description="rollouts those steps come from")


class StepGroupReport(BaseModel):
    task_groups: int = Field(description="groups of rollouts of one task from one initial state (task id, seed)")
    steps: int
    steps_in_shared_groups: int = Field(description="steps whose context key another step of the task group shares")
    share_in_shared_groups: float
    groups: int
    largest: list[StepGroup]


def step_groups(trajectories: Sequence[Trajectory]) -> StepGroupReport:
    """Step groups as TRCA forms them: rollouts of one (task id, seed) are a task group; its
    steps with equal, non-empty context keys are a step group."""
    members: dict[tuple[str, int | None, str], list[int]] = defaultdict(list)
    task_groups: set[tuple[str, int | None]] = set()
    steps = 0
    for index, trajectory in enumerate(trajectories):
        task_groups.add((trajectory.task_id, trajectory.seed))
        for transition in trajectory.transitions:
            steps += 1
            if transition.context_key:
                members[(trajectory.task_id, trajectory.seed, transition.context_key)].append(index)
    shared = sum(len(rollouts) for rollouts in members.values() if len(rollouts) >= 2)
    ranked = sorted(members.items(), key=lambda item: (-len(item[1]), item[0][0], item[0][2]))[:LARGEST_LISTED]
    return StepGroupReport(
        task_groups=len(task_groups), steps=steps, steps_in_shared_groups=shared,
        share_in_shared_groups=shared / steps if steps else 0.0, groups=len(members),
        largest=[StepGroup(task_id=task, seed=seed, context_key=key, steps=len(rollouts), rollouts=len(set(rollouts)))
                 for (task, seed, key), rollouts in ranked])


def format_step_groups(report: StepGroupReport) -> str:
    lines = [f"step groups (TRCA's A_S): {report.steps_in_shared_groups} of {report.steps} steps "
             f"({100 * report.share_in_shared_groups:.1f}%) share their context key with another step of their task "
             f"group; {report.groups} groups over {report.task_groups} task groups"]
    for g in report.largest:
        lines.append(f"  {g.steps:>4} steps from {g.rollouts} rollouts  {g.task_id} (seed {g.seed}): {g.context_key[:100]}")
    if report.steps and not report.steps_in_shared_groups:
        lines.append("  no step shares a group: A_S is 0 everywhere (record several rollouts per task and seed)")
    return "\n".join(lines)
