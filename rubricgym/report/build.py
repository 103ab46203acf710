"""Build a report from a run folder or a trajectory file, and write it as one HTML file.

The page is rendered from Jinja templates with autoescaping on: every piece of trajectory
text is escaped; the only markup not escaped is the SVG matplotlib draws from numbers. The
page carries a Content-Security-Policy that allows no script and no request at all (images
are ``data:``), so even a file crafted by hand cannot make it fetch or run anything.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.atomic_files import atomic_write_text
from rubricgym.estimators import OutcomeRule
from rubricgym.registration import get_spec
from rubricgym.report.plots import advantage_color, curve_svg, slug, text_color
from rubricgym.report.sources import (EPISODES_FILE, SUMMARY_FILE, RunFiles, is_eval_dir, is_run_dir, metric_series,
                                      read_json_file, read_run, read_trajectories)
from rubricgym.report.views import CreditSettings, GroupView, group_trajectories, group_view, visible

REPORT_FILE = "report.html"
CURVES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("success rate", ("success_rate",)),
    ("engine return", ("env_return_mean",)),
    ("TRCA reward (mean per step)", ("trca_reward_mean",)),
    ("return paid by the env (mean)", ("return_mean",)),
    ("parsed-action rate", ("action_parsed_rate",)),
    ("loss", ("loss", "pg_loss")),
    ("KL to the base", ("kl",)),
    ("entropy", ("entropy",)),
    ("clip fraction", ("clip_frac",)),
    ("mean |advantage|", ("advantage_abs_mean",)),
    ("tokens per second", ("throughput/generation_tok_s", "throughput/update_tok_s")),
    ("time per phase (s)", ("time/generation_s", "time/environment_s", "time/tokenization_s", "time/credit_s",
                            "time/update_s")),
)
EVAL_KEYS = ("success_rate", "return_mean", "env_return_mean", "trca_reward_mean", "action_parsed_rate")
#: an eval's summary columns (``mean_return`` is its name for the return with the rubric's rewards)
EVAL_SUMMARY_KEYS = ("episodes", "success_rate", "mean_return", "env_return_mean", "trca_reward_mean",
                     "action_parsed_rate", "steps_mean")


class Curve(BaseModel):
    title: str
    slug: str
    keys: list[str]
    points: int
    svg: str


class Section(BaseModel):
    title: str
    groups: list[GroupView]


class Report(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    title: str
    kind: str  # "run" | "eval" | "trajectories"
    source: str
    generated_at: str
    refresh_seconds: int | None = None
    iterations_done: int = 0
    iterations_total: int | None = None
    curves: list[Curve] = Field(default_factory=list)
    evaluations: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    eval_keys: list[str] = Field(default_factory=list)
    warmup: dict[str, Any] | None = None
    config_text: str = ""
    sections: list[Section] = Field(default_factory=list)
    sampled_note: str = ""
    problems: list[str] = Field(default_factory=list)


def _credit_settings(config: dict[str, Any]) -> CreditSettings:
    alg = config.get("algorithm") if isinstance(config.get("algorithm"), dict) else {}
    out = CreditSettings()
    if alg:
        gamma, eps, outcome = alg.get("gamma"), alg.get("eps"), alg.get("outcome")
        out = CreditSettings(estimator=str(alg.get("advantage", out.estimator)),
                             gamma=float(gamma) if isinstance(gamma, (int, float)) else None,
                             lam=alg.get("trca_lambda") if isinstance(alg.get("trca_lambda"), (int, float)) else None,
                             outcome=outcome if outcome in ("return", "success") else _benchmark_outcome(config),
                             eps=float(eps) if isinstance(eps, (int, float)) else out.eps)
    return out


def _benchmark_outcome(config: dict[str, Any]) -> OutcomeRule | None:
    """The outcome rule of the run's benchmark (the trainer's default when the run set none)."""
    env = config.get("env") if isinstance(config.get("env"), dict) else {}
    env_id = env.get("id")
    if not isinstance(env_id, str) or env.get("factory"):
        return None
    try:
        return get_spec(env_id).outcome
    except LookupError:
        return None


def _sections(trajectories: list, settings: CreditSettings, by_iteration: bool,
              by_task: bool = False) -> list[Section]:
    sections: dict[str, list[GroupView]] = {}
    for key, members in group_trajectories(trajectories, by_task=by_task).items():
        if key[0] == "iteration":
            _, it, g, task = key
            section, title, gid = f"iteration {it}", f"group {g}: task {task}", f"it{it}-g{g}"
        else:
            _, task, seed = key
            section, title, gid = "trajectories", f"task {task} (seed {seed})", f"t-{slug(str(task))}-{seed}"
            if by_task:
                title, gid = f"task {task} ({len(members)} samples)", f"t-{slug(str(task))}"
        sections.setdefault(section if by_iteration else "trajectories", []).append(
            group_view(gid, title, members, settings))
    return [Section(title=k, groups=v) for k, v in sections.items()]


def _run_curves(run: RunFiles) -> list[Curve]:
    curves = []
    for title, keys in CURVES:
        series = {k: metric_series(run.metrics, k) for k in keys}
        series = {k: v for k, v in series.items() if v}
        if series:
            curves.append(Curve(title=title, slug=slug(title), keys=[slug(k) for k in series],
                                points=max(len(v) for v in series.values()), svg=curve_svg(title, series)))
    warm = [(float(m["warmup_step"]), float(m["loss"])) for m in run.warmup_steps
            if isinstance(m.get("warmup_step"), (int, float)) and isinstance(m.get("loss"), (int, float))]
    if warm:
        curves.append(Curve(title="warm start loss", slug="warm-start-loss", keys=["warm-start-loss"],
                            points=len(warm), svg=curve_svg("warm start loss", {"warm start loss": warm},
                                                            xlabel="warm-start step")))
    return curves


def build_run_report(path: Path, *, live: bool = False, refresh_seconds: int = 15, max_iterations: int = 6,
                     max_groups: int = 4) -> Report:
    run = read_run(path, max_iterations=max_iterations, max_groups=max_groups)
    total = (run.config.get("run") or {}).get("iterations") if isinstance(run.config.get("run"), dict) else None
    done = int(run.metrics[-1]["iteration"]) if run.metrics else 0
    evaluations = list(run.evaluations.items())
    keys = [k for k in EVAL_KEYS if any(k in v for _, v in evaluations)]
    shown = sorted({t.meta.get("iteration") for t in run.trajectories if isinstance(t.meta.get("iteration"), int)})
    note = ""
    if run.trajectory_iterations:
        note = (f"trajectories of {len(shown)} of the {len(run.trajectory_iterations)} iterations that stored them "
                f"are shown: {', '.join(str(i) for i in shown)}")
    return Report(
        title=f"run {path.name}", kind="run", source=str(path), generated_at=_now(),
        refresh_seconds=refresh_seconds if live and (total is None or done < total) else None,
        iterations_done=done, iterations_total=total, curves=_run_curves(run), evaluations=evaluations,
        eval_keys=keys, warmup=run.warmup, config_text=run.config_text,
        sections=_sections(run.trajectories, _credit_settings(run.config), by_iteration=True),
        sampled_note=note, problems=run.problems,
    )


def build_trajectory_report(path: Path, *, max_trajectories: int = 200, estimator: str = "trca",
                            gamma: float | None = None) -> Report:
    problems: list[str] = []
    trajectories = read_trajectories(path, problems, limit=max_trajectories)
    settings = CreditSettings(estimator=estimator, gamma=gamma)
    return Report(title=f"trajectories {path.name}", kind="trajectories", source=str(path), generated_at=_now(),
                  sections=_sections(trajectories, settings, by_iteration=True), problems=problems)


def build_eval_report(path: Path, *, max_trajectories: int = 200) -> Report:
    """A ``rubricgym eval`` folder: its summary (all tasks, then each task) and its episodes,
    a task's samples as one group with the credit the rubric gave each step."""
    problems: list[str] = []
    trajectories = read_trajectories(path / EPISODES_FILE, problems, limit=max_trajectories)
    summary = read_json_file(path / SUMMARY_FILE, problems) or {}
    rows: list[tuple[str, dict[str, Any]]] = []
    if summary:
        rows.append(("all tasks", summary))
        per_task = summary.get("per_task") if isinstance(summary.get("per_task"), dict) else {}
        rows += [(f"task {task}", values) for task, values in per_task.items() if isinstance(values, dict)]
    else:
        problems.append(f"{SUMMARY_FILE}: missing (the eval has not finished); the episodes so far are shown")
    keys = [k for k in EVAL_SUMMARY_KEYS if any(k in v for _, v in rows)]
    outcomes = summary.get("outcomes") if isinstance(summary.get("outcomes"), dict) else {}
    note = ", ".join(f"{label} {count}" for label, count in outcomes.items() if count)
    title = f"eval {path.name}" + (f": {summary['env_id']}" if isinstance(summary.get("env_id"), str) else "")
    return Report(title=title, kind="eval", source=str(path), generated_at=_now(), evaluations=rows,
                  eval_keys=keys, sampled_note=f"outcomes: {note}" if note else "",
                  sections=_sections(trajectories, CreditSettings(), by_iteration=False, by_task=True),
                  problems=problems)


def build_report(path: str | os.PathLike[str], **kwargs: Any) -> Report:
    """A run folder, an eval folder or a trajectory file (JSON lines)."""
    path = Path(path)
    if is_run_dir(path):
        return build_run_report(path, **kwargs)
    if is_eval_dir(path):
        return build_eval_report(path, **{k: v for k, v in kwargs.items() if k == "max_trajectories"})
    if path.is_file():
        return build_trajectory_report(path, **{k: v for k, v in kwargs.items()
                                                 if k in ("max_trajectories", "estimator", "gamma")})
    raise FileNotFoundError(f"{path}: neither a run folder (with {REPORT_FILE!r}'s inputs: config.yaml, "
                            f"metrics.jsonl), an eval folder ({EPISODES_FILE}) nor a trajectory file")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)
    return str(value)


def _printable(value: Any) -> Any:
    """Every text the template prints: control characters as their Unicode pictures."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("rubricgym.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=_printable)
    env.filters["fmt"] = _fmt
    env.globals.update(adv_color=advantage_color, text_color=text_color)
    return env


def render(report: Report) -> str:
    curves = [c.model_copy(update={"svg": Markup(c.svg)}) for c in report.curves]  # noqa: S704 (our own SVG)
    return _environment().get_template("report.html").render(report=report, curves=curves)


def write_report(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, **kwargs: Any) -> Path:
    """Build and write the report; the file is replaced atomically (a browser never reads
    half a page). Default output: ``report.html`` in the run folder / next to the file."""
    path = Path(path)
    target = Path(out) if out else (path / REPORT_FILE if path.is_dir() else path.with_suffix(".html"))
    html = render(build_report(path, **kwargs))
    return atomic_write_text(target, html, mode=0o644)  # a report is for reading
