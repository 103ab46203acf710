"""The numbers of an eval: ``summarize`` (success with its Wilson interval, pass@k and pass^k,
returns, tokens, cost, the rubric's reward by step index) and ``compare_runs`` (two evals on
their shared (task, sample) pairs, the exact McNemar test). The statistics themselves are
``rubricgym.trainers.statistics``, shared with the trainer's held-out evaluation."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rubricgym.jsonl import iter_json_lines
from rubricgym.trainers.eval.settings import EPISODES_FILE, EvalSettings
from rubricgym.trainers.statistics import mcnemar_exact, pass_at_k, pass_hat_k, wilson_interval


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan  # exact sum: the same in any order


def _over_tasks(by_task: dict[str, list[dict[str, Any]]], k: int, estimate: Callable[[int, int, int], float]) -> float:
    """pass@k or pass^k averaged over the tasks with at least k counted samples."""
    values = [estimate(len(rs), sum(r["success"] for r in rs), k) for rs in by_task.values() if len(rs) >= k]
    return _mean(values)


def summarize(records: Sequence[dict[str, Any]], settings: EvalSettings) -> dict[str, Any]:
    """Success with its Wilson 95% interval, pass@k (unbiased) and pass^k for every k up to K,
    returns (env and TRCA), the parsed-action rate, steps, tokens, cost, outcomes by label, a
    per-task table, and per step index the mean reward the rubric paid (positive) or charged
    (negative). Env failures are left out of every rate (they are the engine's, not the
    policy's); policy failures count as failures."""
    counted = [r for r in records if r["outcome"] != "env_error"]
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in counted:
        by_task[r["task_id"]].append(r)
    wins = sum(bool(r["success"]) for r in counted)
    ci = wilson_interval(wins, len(counted)) if counted else (math.nan, math.nan)
    steps = [s for r in counted for s in r["step_records"]]
    trca = [sum(s["trca_reward"] for s in r["step_records"]) for r in counted
            if r["step_records"] and all(s.get("trca_reward") is not None for s in r["step_records"])]
    most = max((len(rs) for rs in by_task.values()), default=0)
    by_step: dict[int, list[float]] = defaultdict(list)
    for r in counted:
        for t, step in enumerate(r["step_records"]):
            by_step[t].append(step["reward"] - step["env_reward"])
    prompt = sum(r["prompt_tokens"] for r in records)
    completion = sum(r["completion_tokens"] for r in records)
    return {
        "env_id": settings.env_id, "policy": settings.policy.model_dump(exclude={"api_key_file"}),
        "episodes": len(records), "counted": len(counted),
        "outcomes": {k: sum(1 for r in records if r["outcome"] == k) for k in
                     ("success", "failure", "truncated", "policy_error", "env_error")},
        "success_rate": wins / len(counted) if counted else math.nan,
        "success_ci95": list(ci),
        "pass_at": {str(k): _over_tasks(by_task, k, pass_at_k) for k in range(1, most + 1)},
        "pass_hat": {str(k): _over_tasks(by_task, k, pass_hat_k) for k in range(1, most + 1)},
        "env_return_mean": _mean([r["env_return"] for r in counted]),
        "trca_reward_mean": _mean(trca),
        "action_parsed_rate": _mean([float(s.get("parsed", s["accepted"])) for s in steps]),
        "steps_mean": _mean([r["steps"] for r in counted]),
        "per_task": {t: {"episodes": len(rs), "successes": sum(bool(r["success"]) for r in rs),
                         "success_rate": _mean([float(r["success"]) for r in rs]),
                         "env_return_mean": _mean([r["env_return"] for r in rs]),
                         "steps_mean": _mean([r["steps"] for r in rs])} for t, rs in sorted(by_task.items())},
        "errors_by_outcome": {k: sorted({str(r["error"])[:200] for r in records if r["outcome"] == k and r["error"]})
                              for k in ("policy_error", "env_error")},
        "mean_return": _mean([r["return"] for r in counted]),
        "rubric_reward_by_step": {str(t): sum(v) / len(v) for t, v in sorted(by_step.items())},
        "prompt_tokens": prompt, "completion_tokens": completion,
        "cost_usd": (prompt * settings.price_prompt_per_mtok + completion * settings.price_completion_per_mtok) / 1e6,
    }


def compare_runs(a_dir: Path, b_dir: Path) -> dict[str, Any]:
    """Two evals' episodes on their shared (task, sample) pairs: success of each, per-task
    differences, and the exact McNemar test on the discordant pairs (env failures left out)."""
    runs = []
    for folder in (a_dir, b_dir):
        path = Path(folder) / EPISODES_FILE
        if not path.is_file():
            raise ValueError(f"--compare: {path} does not exist (a finished rubricgym eval's folder is needed)")
        runs.append({(str(r["task_id"]), int(r["sample"])): r for _, r in iter_json_lines(path, what="an episode record")
                     if r["outcome"] != "env_error"})
    shared = sorted(set(runs[0]) & set(runs[1]))
    if not shared:
        raise ValueError("--compare: the two evals share no (task, sample) pair without an env failure")
    a_wins = [bool(runs[0][p]["success"]) for p in shared]
    b_wins = [bool(runs[1][p]["success"]) for p in shared]
    only_a = sum(a and not b for a, b in zip(a_wins, b_wins, strict=True))
    only_b = sum(b and not a for a, b in zip(a_wins, b_wins, strict=True))
    per_task: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for pair, a, b in zip(shared, a_wins, b_wins, strict=True):
        per_task[pair[0]].append((a, b))
    return {"a": str(a_dir), "b": str(b_dir), "pairs": len(shared), "success_a": _mean([float(x) for x in a_wins]),
            "success_b": _mean([float(x) for x in b_wins]), "only_a": only_a, "only_b": only_b,
            "mcnemar_p": mcnemar_exact(only_a, only_b),
            "per_task": {t: {"pairs": len(v), "success_a": _mean([float(a) for a, _ in v]),
                             "success_b": _mean([float(b) for _, b in v]),
                             "difference": _mean([float(b) - float(a) for a, b in v])} for t, v in sorted(per_task.items())}}
