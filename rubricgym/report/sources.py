"""Reading what a report is made of: a trainer's run folder or a trajectory file.

Nothing here trusts the files: an unreadable line is skipped and counted in ``problems``
(shown in the report), never a crash. A long run's trajectories are sampled: at most
``max_iterations`` iteration files (evenly spaced, first and last included) and at most
``max_groups`` groups of each, so the report's size does not grow with the run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rubricgym.contract import Trajectory, trajectory_from_record
from rubricgym.jsonl import iter_json_lines
from rubricgym.yaml_files import YamlFileError, parse_yaml

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
WARMUP_FILE = "warmup.json"
SUMMARY_FILE = "summary.json"
TRAJECTORY_FOLDER = "trajectories"
EPISODES_FILE = "episodes.jsonl"  # rubricgym eval's output


class RunFiles(BaseModel):
    """Everything read from a run folder."""

    path: str
    config_text: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    metrics: list[dict[str, Any]] = Field(default_factory=list, description="RL iterations, in order")
    warmup_steps: list[dict[str, Any]] = Field(default_factory=list)
    evaluations: dict[str, dict[str, Any]] = Field(default_factory=dict, description="name -> metrics")
    warmup: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    trajectory_iterations: list[int] = Field(default_factory=list, description="all iterations with trajectories")
    trajectories: list[Trajectory] = Field(default_factory=list, description="the sampled ones")
    problems: list[str] = Field(default_factory=list)


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and ((path / METRICS_FILE).exists() or (path / CONFIG_FILE).exists())


def is_eval_dir(path: Path) -> bool:
    """A ``rubricgym eval`` output folder (its episodes, and its summary once finished)."""
    return path.is_dir() and (path / EPISODES_FILE).is_file()


def read_json_file(path: Path, problems: list[str]) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name}: unreadable ({exc})")
        return None
    return data if isinstance(data, dict) else None


def read_metrics(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """Every JSON object line; the last line of a run being written may be partial."""
    if not path.is_file():
        return []
    try:
        return [row for _, row in iter_json_lines(path, what="a metrics record", errors="skip", problems=problems)]
    except OSError as exc:
        problems.append(f"{path.name}: unreadable ({exc})")
        return []


def read_trajectories(path: Path, problems: list[str], limit: int | None = None) -> list[Trajectory]:
    """Trajectories of a JSON-lines file; bad lines are counted, not fatal."""
    out: list[Trajectory] = []
    try:
        for lineno, data in iter_json_lines(path, what="a trajectory", errors="skip", problems=problems):
            if limit is not None and len(out) >= limit:
                problems.append(f"{path.name}: only the first {limit} trajectories are shown")
                break
            try:
                out.append(trajectory_from_record(data))
            except ValueError as exc:
                problems.append(f"{path.name}:{lineno}: not a trajectory ({type(exc).__name__}), skipped")
    except OSError as exc:
        problems.append(f"{path.name}: unreadable ({exc})")
    return out


def sample_evenly(items: list[Any], count: int) -> list[Any]:
    """``count`` items spread over the list, always the first and the last."""
    if count <= 0:
        return []
    if len(items) <= count:
        return list(items)
    if count == 1:
        return [items[-1]]
    step = (len(items) - 1) / (count - 1)
    picks = sorted({round(k * step) for k in range(count)})
    return [items[i] for i in picks]


def _iteration_of(path: Path) -> int:
    try:
        return int(path.stem.rsplit("-", 1)[-1])
    except ValueError:
        return -1


def read_run(path: Path, max_iterations: int = 6, max_groups: int = 4) -> RunFiles:
    run = RunFiles(path=str(path))
    problems = run.problems
    config_path = path / CONFIG_FILE
    if config_path.is_file():
        run.config_text = config_path.read_text(encoding="utf-8", errors="replace")
        try:
            loaded = parse_yaml(run.config_text, CONFIG_FILE)
            run.config = loaded if isinstance(loaded, dict) else {}
        except YamlFileError as exc:
            problems.append(str(exc))
    for row in read_metrics(path / METRICS_FILE, problems):
        phase = row.get("phase", "rl")
        if phase == "rl":
            run.metrics.append(row)
        elif phase == "warmup" and "eval" in row:
            run.evaluations[f"warm start: {row['eval']}"] = row
        elif phase == "warmup":
            run.warmup_steps.append(row)
    # a resumed run may have rewritten iterations: keep the last line of each
    by_iteration = {int(m["iteration"]): m for m in run.metrics if isinstance(m.get("iteration"), (int, float))}
    run.metrics = [by_iteration[k] for k in sorted(by_iteration)]
    run.warmup = read_json_file(path / WARMUP_FILE, problems)
    run.summary = read_json_file(path / SUMMARY_FILE, problems)
    if run.summary:
        for name in ("before", "after_warmup", "after"):
            if isinstance(run.summary.get(name), dict):
                run.evaluations[f"summary: {name}"] = run.summary[name]
    files = sorted((p for p in (path / TRAJECTORY_FOLDER).glob("iter-*.jsonl")), key=_iteration_of) \
        if (path / TRAJECTORY_FOLDER).is_dir() else []
    run.trajectory_iterations = [_iteration_of(p) for p in files]
    for file in sample_evenly(files, max_iterations):
        trajectories = read_trajectories(file, problems)
        groups = sorted({t.meta.get("group", 0) for t in trajectories if isinstance(t.meta.get("group", 0), int)})
        keep = set(groups[:max_groups])
        if len(groups) > max_groups:
            problems.append(f"{file.name}: {len(groups) - max_groups} of {len(groups)} groups not shown")
        run.trajectories += [t for t in trajectories if t.meta.get("group", 0) in keep]
    return run


def metric_series(metrics: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """(iteration, value) for every iteration where ``key`` is a finite number."""
    out = []
    for row in metrics:
        value, it = row.get(key), row.get("iteration")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and isinstance(it, (int, float)):
            out.append((float(it), float(value)))
    return out
