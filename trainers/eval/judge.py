"""``rubricgym eval --judge``: DRACO verdicts on an eval's episodes. The K samples of a task
are one group (the paper's setting: rollouts of one task judged together), so ``--samples``
must be at least 2. Each group goes through the judge's own ``score_group`` (dynamic or static
rubric, dropout, R_i and A_i, cited steps); the result lines are written as ``rubricgym judge``
writes them, and each episode gets its R_i and A_i in the summary."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rubricgym.contract import Trajectory
from rubricgym.credit.draco import DracoVariant
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.pipeline import DracoJudge
from rubricgym.judges.rubric import load_rubric
from rubricgym.registration import judge_rubric_file

JUDGE_FILE = "judge.jsonl"


class EvalJudge(BaseModel):
    """Which judge scores the episodes (an OpenAI-compatible endpoint; its key only by
    reference) and with which DRACO variant."""

    model_config = ConfigDict(extra="forbid")

    settings: JudgeSettings
    variant: str = Field(DracoVariant.DYNAMIC_CREDIT.value, description="a DRACO variant (rubric source x credit)")
    rubric: str | None = Field(None, description="static rubric file (default: the benchmark's packaged one)")


class JudgedEpisodes(BaseModel):
    """What the judge said: one result line per group, and (task, sample) -> R_i, A_i."""

    lines: list[dict[str, Any]]
    scores: dict[str, dict[str, float]]
    ledger: dict[str, Any]

    def summary(self, variant: str) -> dict[str, Any]:
        rewards = [s["reward"] for s in self.scores.values()]
        per_task: dict[str, list[float]] = defaultdict(list)
        for key, score in self.scores.items():
            per_task[key.rsplit("#", 1)[0]].append(score["reward"])
        return {"variant": variant, "groups": sum(1 for line in self.lines if "error" not in line),
                "failed_groups": sum(1 for line in self.lines if "error" in line), "episodes": len(rewards),
                "reward_mean": sum(rewards) / len(rewards) if rewards else None,
                "per_task_reward": {t: sum(v) / len(v) for t, v in sorted(per_task.items())},
                "calls": self.ledger.get("calls", 0), "cost_usd": self.ledger.get("cost_usd", 0.0)}


def episode_key(task_id: str, sample: int) -> str:
    return f"{task_id}#{sample}"


def judge_episodes(records: Sequence[dict[str, Any]], judge_spec: EvalJudge, env_id: str) -> JudgedEpisodes:
    """Score every task's finished samples as one group (env failures left out, as in the
    success rate; a task with fewer than two samples is not a group). A group the judge
    cannot score becomes an ``error`` line, never a crashed eval."""
    variant = DracoVariant.parse(judge_spec.variant)
    rubric = load_rubric(judge_rubric_file(judge_spec.rubric or env_id))
    judge = DracoJudge.from_settings(judge_spec.settings, static_rubric=rubric)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["outcome"] != "env_error" and r.get("trajectory"):
            groups[str(r["task_id"])].append(r)
    lines: list[dict[str, Any]] = []
    scores: dict[str, dict[str, float]] = {}
    for task_id, members in sorted(groups.items()):
        members = sorted(members, key=lambda r: int(r["sample"]))
        if len(members) < 2:
            continue
        trajectories = [Trajectory.model_validate(r["trajectory"]) for r in members]
        samples = [int(r["sample"]) for r in members]
        try:
            result = judge.score_group(trajectories[0].instruction, trajectories, variant, training_step=None)
        except Exception as exc:  # noqa: BLE001 - a bug or a dead judge: this group's line says so
            lines.append({"task_id": task_id, "samples": samples, "error": f"{type(exc).__name__}: {exc}"[:500]})
            continue
        lines.append({"task_id": task_id, "samples": samples, **result.model_dump(mode="json")})
        for sample, rollout in zip(samples, result.rollouts, strict=True):
            scores[episode_key(task_id, sample)] = {"reward": rollout.reward, "advantage": rollout.advantage}
    return JudgedEpisodes(lines=lines, scores=scores, ledger=judge.ledger.summary()["total"])
