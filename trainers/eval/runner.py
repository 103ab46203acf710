"""``run_eval``: one eval from its settings to its output folder.

Every episode is appended to ``OUT/episodes.jsonl`` as it finishes; ``--resume`` skips the (task,
sample) pairs already there (``--retry-errors``: except those that ended as policy_error or
env_error, whose records are dropped and episodes played again). ``OUT/summary.json`` holds success rates, returns, tokens, cost
and the rubric's reward by step index (with ``--judge``, the judge's lines are ``OUT/judge.jsonl``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rubricgym.jsonl import JsonLinesError, iter_json_lines
from rubricgym.trainers.eval.judge import JUDGE_FILE, judge_episodes
from rubricgym.trainers.eval.settings import EPISODES_FILE, ERROR_OUTCOMES, SUMMARY_FILE, EvalSettings
from rubricgym.trainers.eval.summary import summarize
from rubricgym.trainers.eval.workers import play_jobs


class UnusableResults(ValueError):
    """The output folder's files cannot be resumed from; the message says which line and why."""


def done_pairs(path: Path) -> set[tuple[str, int]]:
    """The (task, sample) pairs ``path`` already holds. A line that is not a record is
    ``UnusableResults`` naming the file and line (files are untrusted input)."""
    if not path.is_file():
        return set()
    pairs = set()
    try:
        for number, record in iter_json_lines(path, what="an episode record"):
            task, sample = record.get("task_id"), record.get("sample")
            if not isinstance(task, str) or not isinstance(sample, int) or isinstance(sample, bool):
                raise UnusableResults(f"{path}:{number}: not an episode record: no task_id and sample")
            pairs.add((task, sample))
    except JsonLinesError as exc:
        raise UnusableResults(str(exc)) from None
    return pairs


def errored_lines(path: Path) -> dict[int, str]:
    """Line number -> outcome of the records ``path`` holds that ended as ``policy_error`` or
    ``env_error`` (``UnusableResults`` for a line that is not a record)."""
    if not path.is_file():
        return {}
    try:
        return {number: record["outcome"] for number, record in iter_json_lines(path, what="an episode record")
                if record.get("outcome") in ERROR_OUTCOMES}
    except JsonLinesError as exc:
        raise UnusableResults(str(exc)) from None


def _count(errored: dict[int, str]) -> str:
    return ", ".join(f"{o} {n}" for o in ERROR_OUTCOMES if (n := list(errored.values()).count(o)))


def settle_errors(path: Path, retry: bool, write: Callable[[Path, str], None]) -> str | None:
    """``--resume``: with ``retry`` drop the errored records (their episodes are played again),
    else keep them; either way what happened, for the user (None when there were none)."""
    errored = errored_lines(path)
    if not errored:
        return None
    if not retry:
        return (f"keeping {len(errored)} errored episode(s) ({_count(errored)}) from {path}; "
                "--retry-errors plays them again")
    kept = [line for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(keepends=True), 1)
            if number not in errored]
    write(path, "".join(kept))
    return f"playing {len(errored)} errored episode(s) ({_count(errored)}) again; their records were dropped"


Progress = Callable[[dict[str, Any], int, int], None]
Player = Callable[[EvalSettings, list[tuple[str, int, int]], Path, Progress | None], None]


def run_eval(settings: EvalSettings, progress: Progress | None = None, notice: Callable[[str], None] | None = None,
             play: Player = play_jobs) -> dict[str, Any]:
    """Play the (task, sample) pairs ``OUT/episodes.jsonl`` lacks, then write the summary (and
    the judge's lines); ``notice`` hears about the errored episodes a resumed run keeps or
    replays. ``play`` appends each job's record: the worker processes by default,
    ``rubricgym.evaluate``'s in-process loop for an agent object."""
    # lazy: run_files loads the trainer's checkpoint code (torch, peft); the spawned workers
    # import this package for their episodes and need none of it
    from rubricgym.trainers.run_files import drop_partial_line, refuse_links_outside, write_run_file

    out = Path(settings.out)
    if out.exists():
        try:
            refuse_links_outside(out)
        except ValueError as exc:
            raise UnusableResults(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)
    episodes = out / EPISODES_FILE
    if episodes.exists() and not settings.resume:
        raise FileExistsError(f"{episodes} exists: pass --resume to continue it, or another --out")
    drop_partial_line(episodes)  # a record cut by a kill: its episode is played again
    if settings.resume:
        said = settle_errors(episodes, settings.retry_errors, write_run_file)
        if said and notice is not None:
            notice(said)
    done = done_pairs(episodes)
    jobs = [(task, sample, settings.seed + 1000 * sample + i) for i, task in enumerate(settings.tasks)
            for sample in range(settings.samples) if (task, sample) not in done]
    if jobs:
        play(settings, jobs, episodes, progress)
    records = [r for _, r in iter_json_lines(episodes, what="an episode record")] if episodes.exists() else []
    records.sort(key=lambda r: (str(r["task_id"]), int(r["sample"])))  # file order depends on finishing order
    summary = summarize(records, settings)
    if settings.judge is not None:  # after every episode is in: a task's K samples are one group
        judged = judge_episodes(records, settings.judge, settings.env_id)
        write_run_file(out / JUDGE_FILE, "".join(json.dumps(line, default=str) + "\n" for line in judged.lines))
        summary["draco"] = judged.summary(settings.judge.variant)
        summary["draco"]["per_episode"] = judged.scores
    write_run_file(out / SUMMARY_FILE, json.dumps(summary, indent=2, default=str))
    return summary
