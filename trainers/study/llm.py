"""``rubricgym study --policy llm``: sample efficiency of estimators with the LLM trainer.

Each estimator is trained from the same config with several seeds; every run consumes the same
number of trajectories (iterations x tasks per iteration x group size). The study records
success and reward against trajectories consumed (``study.csv`` / ``study.jsonl``), draws the
curves with their seed spread (``curves.png`` / ``curves.svg``) and reports, per estimator, the
trajectories needed for the seed-mean success to reach a target (``summary.json``, ``summary.md``).

    rubricgym study --config configs/study_cpu.yaml --estimators grpo,trca --seeds 0,1 \\
        --trajectories 64 --target 0.5 --output-dir runs/study --jobs 2

With ``--jobs N`` the runs go to N worker processes (each run is independent; the CPU's
threads are split between them). A run that fails is reported with its error in the summary
and the exit code; the other runs' results are still written.

Matched comparisons: the estimators differ only in their advantages. The study config must
state the objective (``algorithm.ratio_level``, ``loss_aggregation``, ``skip_zero_advantage``;
clipping, KL and entropy have fixed defaults), and every run trains with it; the
per-estimator objective defaults apply only to single runs. ``summary.json`` records the
objective. A finished run leaves ``runs/<estimator>-seed<seed>/study_run.json``; a study run
again into the same folder takes those and trains only the runs that had not finished.

With ``--held-out`` every run is also evaluated, after its last iteration, on the held-out tasks
of the config's ``evaluation`` section (greedy unless it says otherwise): training success shows
what the policy learned on the tasks it trained on, held-out success whether it generalises.
Runs are trained seed by seed (every estimator of seed 0 first), so a study stopped early has
whole seeds to compare.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rubricgym.env_factories import register_env_factories, registered_env_factories
from rubricgym.estimators import get_estimator
from rubricgym.trainers.config import load_config
from rubricgym.trainers.run_files import seed_run_name, write_run_file
from rubricgym.trainers.study.pool import study_pool
from rubricgym.trainers.study.statistics import area_under_curve, band, format_band, paired_comparison
from rubricgym.trainers.trainer import Trainer

#: what a matched study must state (the estimators' own defaults differ in these)
MATCHED_OBJECTIVE = ("ratio_level", "loss_aggregation", "skip_zero_advantage")
#: the objective every run of a study shares, as recorded in summary.json
OBJECTIVE_FIELDS = (*MATCHED_OBJECTIVE, "clip_low", "clip_high", "kl_coef", "entropy_coef", "lr", "epochs",
                    "minibatches", "micro_batch_size", "max_grad_norm", "eps")
RUN_FILE = "study_run.json"
HELD_OUT_FIELDS = ("estimator", "seed", "env_id", "held_out", "episodes", "successes", "success_rate")
CURVE_FIELDS = ("estimator", "seed", "iteration", "trajectories", "success_rate", "return_mean", "env_return_mean",
                "trca_reward_mean")


class StudySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    estimators: list[str] = Field(default_factory=lambda: ["grpo", "trca", "trca_no_rf", "trca_no_rb"])
    seeds: list[int] = Field(default_factory=lambda: [0, 1])
    trajectories: int = Field(64, ge=1, description="trajectory budget of every run")
    target_success: float = Field(0.5, ge=0.0, le=1.0)
    config: str | None = None
    overrides: list[str] = Field(default_factory=list)
    output_dir: str = "runs/study"
    jobs: int = Field(1, ge=1, description="runs trained at once, each in its own process")
    held_out: bool = Field(False, description="evaluate every run on the held-out tasks after training")

    @field_validator("estimators")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        for name in names:
            get_estimator(name)
        return names


class UnmatchedStudy(ValueError):
    """The study config leaves part of the objective to each estimator's defaults."""


def matched_objective(settings: StudySettings) -> dict[str, Any]:
    """The objective every run of the study trains with; ``UnmatchedStudy`` when the config
    leaves a part of it to the estimators (results would then depend on which were listed)."""
    algorithm = load_config(settings.config, settings.overrides).algorithm
    missing = [name for name in MATCHED_OBJECTIVE if getattr(algorithm, name) is None]
    if missing:
        raise UnmatchedStudy(
            "a study compares estimators that differ only in their advantages, so its config states the objective: "
            f"set {', '.join('algorithm.' + m for m in missing)} (e.g. --set algorithm.ratio_level=token "
            "--set algorithm.loss_aggregation=token_mean --set algorithm.skip_zero_advantage=false); each "
            "estimator's own defaults apply to single runs only")
    return {name: getattr(algorithm, name) for name in OBJECTIVE_FIELDS}


def trajectories_per_iteration(config: Any) -> int:
    return int(config.algorithm.tasks_per_iteration) * int(config.algorithm.group_size)


class RunResult(BaseModel):
    """One finished (estimator, seed): its curve rows and, with ``--held-out``, its held-out result."""

    rows: list[dict[str, Any]]
    held_out: dict[str, Any] | None = None


def run_one(settings: StudySettings, estimator: str, seed: int, out: Path) -> RunResult:
    """Train one (estimator, seed) to the budget (and evaluate it on the held-out tasks when
    asked); the result is kept beside the run, so a study run again skips it."""
    finished = out / seed_run_name(estimator, seed) / RUN_FILE
    if finished.is_file():
        kept = RunResult.model_validate_json(finished.read_text(encoding="utf-8"))
        if kept.held_out is not None or not settings.held_out:
            return kept
    base = load_config(settings.config, settings.overrides)
    per_iteration = trajectories_per_iteration(base)
    iterations = max(1, math.ceil(settings.trajectories / per_iteration))
    config = load_config(settings.config, [*settings.overrides, f"algorithm.advantage={estimator}",
                                            f"run.seed={seed}", f"run.iterations={iterations}",
                                            "run.evaluate_after=false", "run.progress=false",
                                            f"run.name={seed_run_name(estimator, seed)}", f"run.output_dir={out}"])
    trainer = Trainer(config)
    try:
        trainer.train(evaluate=False)
        metrics = trainer.read_metrics()
        held_out = None
        if settings.held_out:
            result = trainer.evaluate_held_out("after")
            held_out = {"estimator": estimator, "seed": seed, "env_id": trainer.held_out.plan.env_id,
                        "held_out": result.held_out, "episodes": result.episodes, "successes": result.successes,
                        "success_rate": result.success_rate}
    finally:
        trainer.close()
    rows = []
    for m in metrics:
        row = {"estimator": estimator, "seed": seed, "iteration": int(m["iteration"]),
               "trajectories": int(m["iteration"]) * per_iteration}
        row.update({k: float(m.get(k, float("nan"))) for k in CURVE_FIELDS[4:]})
        rows.append(row)
    run = RunResult(rows=rows, held_out=held_out)
    finished.parent.mkdir(parents=True, exist_ok=True)
    write_run_file(finished, run.model_dump_json())
    return run


def mean_curves(rows: list[dict[str, Any]], key: str = "success_rate") -> dict[str, list[tuple[int, float, float, float]]]:
    """Per estimator: (trajectories, mean, min, max) over seeds, in order of trajectories."""
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[r["estimator"]][r["trajectories"]].append(float(r[key]))
    return {est: [(t, sum(v) / len(v), min(v), max(v)) for t, v in sorted(points.items())]
            for est, points in by.items()}


def trajectories_to_target(rows: list[dict[str, Any]], target: float) -> dict[str, int | None]:
    """The first budget at which an estimator's seed-mean success reaches ``target`` (None: never)."""
    return {est: next((t for t, mean, _, _ in curve if mean >= target), None)
            for est, curve in mean_curves(rows).items()}


def held_out_summary(held_out: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per estimator: held-out success over seeds (mean, min, max, and each seed's)."""
    by: dict[str, dict[int, float]] = defaultdict(dict)
    for r in held_out:
        by[r["estimator"]][int(r["seed"])] = float(r["success_rate"])
    return {est: {"mean": sum(v.values()) / len(v), "min": min(v.values()), "max": max(v.values()),
                  "per_seed": {str(k): v[k] for k in sorted(v)}} for est, v in by.items()}


def seed_statistics(rows: list[dict[str, Any]], held_out: list[dict[str, Any]], estimators: list[str],
                    window: int = 2) -> dict[str, Any]:
    """The choice study's statistics for the LLM runs: per estimator, the mean over seeds with
    its 95% t-interval of the area under the success curve (mean training success over the
    iterations), the final success (mean of the last ``window`` iterations) and the held-out
    success; each estimator against the first listed, paired by seed (sign-flip and t-test)."""
    per: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    curves: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    for r in rows:
        curves[(r["estimator"], int(r["seed"]))].append((int(r["trajectories"]), float(r["success_rate"])))
    for (est, seed), points in curves.items():
        points.sort()
        ys = [y for _, y in points]
        per[est]["auc"][seed] = area_under_curve([x for x, _ in points], ys)
        per[est]["final"][seed] = sum(ys[-window:]) / len(ys[-window:])
    for r in held_out:
        per[r["estimator"]]["held_out"][int(r["seed"])] = float(r["success_rate"])
    table = {est: {metric: band([v[s] for s in sorted(v)]).as_dict() for metric, v in per[est].items()}
             for est in estimators if est in per}
    baseline = next((est for est in estimators if est in per), None)
    paired: dict[str, Any] = {}
    for est in table:
        if est == baseline:
            continue
        paired[est] = {}
        for metric in per[est]:
            common = set(per[est][metric]) & set(per[baseline][metric])
            if len(common) < 2:
                continue
            paired[est][metric] = paired_comparison(per[est][metric], per[baseline][metric]).as_dict()
    return {"window": window, "baseline": baseline, "estimators": table, "paired_vs_baseline": paired}


def plot(rows: list[dict[str, Any]], out: Path, target: float) -> list[Path]:
    import matplotlib  # optional: the report extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional: the report extra

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for ax, key, label in ((axes[0], "success_rate", "success rate"), (axes[1], "return_mean", "mean return")):
        for est, curve in sorted(mean_curves(rows, key).items()):
            xs = [c[0] for c in curve]
            ax.plot(xs, [c[1] for c in curve], marker="o", label=est)
            ax.fill_between(xs, [c[2] for c in curve], [c[3] for c in curve], alpha=0.2)
        ax.set_xlabel("trajectories consumed")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].axhline(target, color="grey", linestyle="--", linewidth=1)
    axes[0].legend(title="estimator (band: seed min-max)")
    paths = [out / "curves.png", out / "curves.svg"]
    for path in paths:
        fig.savefig(path)
    plt.close(fig)
    return paths


def write_results(rows: list[dict[str, Any]], settings: StudySettings, out: Path,
                  failed: dict[str, str] | None = None, objective: dict[str, Any] | None = None,
                  held_out: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    write_run_file(out / "study.csv", _csv(rows, CURVE_FIELDS))
    write_run_file(out / "study.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    needed = trajectories_to_target(rows, settings.target_success)
    final = {est: curve[-1][1] for est, curve in mean_curves(rows).items()}
    held = held_out_summary(held_out or [])
    if settings.held_out:
        write_run_file(out / "held_out.csv", _csv(held_out or [], HELD_OUT_FIELDS))
    stats = seed_statistics(rows, held_out or [], settings.estimators)
    summary = {"settings": settings.model_dump(), "objective": objective, "trajectories_to_target": needed,
               "final_success_mean": final, "held_out_success": held, "statistics": stats,
               "failed_runs": failed or {},
               "plots": [p.name for p in plot(rows, out, settings.target_success)] if rows else []}
    write_run_file(out / "summary.json", json.dumps(summary, indent=2))
    header = f"| estimator | trajectories to success >= {settings.target_success:g} | final success (seed mean) |"
    lines = [header + (" held-out success (seed mean, min-max) |" if settings.held_out else ""),
             "|---|---|---|" + ("---|" if settings.held_out else "")]
    for est in settings.estimators:
        if est not in needed:
            continue
        line = f"| `{est}` | {needed[est] if needed[est] is not None else 'not reached'} | {final[est]:.3f} |"
        if settings.held_out:
            h = held.get(est)
            line += f" {h['mean']:.3f} ({h['min']:.2f}-{h['max']:.2f}) |" if h else " - |"
        lines.append(line)
    lines += _statistics_lines(stats)
    lines += [f"\nfailed run `{name}`: {error}" for name, error in (failed or {}).items()]
    if objective:
        lines.append("\nEvery run trained with the same objective: "
                     + ", ".join(f"{k}={v}" for k, v in objective.items()))
    write_run_file(out / "summary.md", "\n".join(lines) + "\n")
    return summary


def _statistics_lines(stats: dict[str, Any]) -> list[str]:
    """Markdown: the bands over seeds, then the paired comparisons against the baseline."""
    names = {"auc": "area under the curve", "final": f"final success (last {stats['window']} iterations)",
             "held_out": "held-out success"}

    metrics = [m for m in names if any(m in t for t in stats["estimators"].values())]
    lines = ["", "Mean over seeds, % [95% t-interval]:", "", "| estimator | " + " | ".join(names[m] for m in metrics)
             + " |", "|---|" + "---|" * len(metrics)]
    for est, table in stats["estimators"].items():
        lines.append(f"| `{est}` | " + " | ".join(format_band(table.get(m)) for m in metrics) + " |")
    if stats["paired_vs_baseline"]:
        lines += ["", f"Paired against `{stats['baseline']}` (points; sign-flip p / paired-t p, seeds better/worse):",
                  "", "| estimator | " + " | ".join(names[m] for m in metrics) + " |", "|---|" + "---|" * len(metrics)]
        for est, comparison in stats["paired_vs_baseline"].items():
            cells = []
            for m in metrics:
                c = comparison.get(m)
                cells.append(f"{format_band(c['difference'])}, p={c['p_sign_flip']:.3f} / {c['p_t_test']:.3f}, "
                             f"{c['better']}/{c['worse']}" if c else "-")
            lines.append(f"| `{est}` | " + " | ".join(cells) + " |")
    return lines


def _csv(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> str:
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(fields))
    writer.writeheader()
    writer.writerows(rows)
    return table.getvalue()


def _run_one_safely(settings: StudySettings, estimator: str, seed: int, out: Path) -> RunResult | str:
    """One run's result, or its error as text (one failed run must not lose the others)."""
    try:
        return run_one(settings, estimator, seed, out)
    except Exception as exc:  # noqa: BLE001 - reported per run in the summary and the exit code
        return f"{type(exc).__name__}: {exc}"


def _threads_per_job(settings: StudySettings) -> StudySettings:
    """Split the usable CPUs between parallel runs unless the config sets ``run.threads``."""
    if settings.jobs == 1 or any(o.split("=", 1)[0].strip() == "run.threads" for o in settings.overrides):
        return settings
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = max(1, cpus // settings.jobs)
    return settings.model_copy(update={"overrides": [*settings.overrides, f"run.threads={threads}"]})


def run_study(settings: StudySettings) -> dict[str, Any]:
    objective = matched_objective(settings)
    out = Path(settings.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    pairs = [(estimator, seed) for estimator in settings.estimators for seed in settings.seeds]
    # trained seed by seed: a study stopped early has every estimator of its first seeds
    order = sorted(pairs, key=lambda pair: (settings.seeds.index(pair[1]), settings.estimators.index(pair[0])))
    run_settings = _threads_per_job(settings)
    if settings.jobs == 1:
        done = {(e, s): _run_one_safely(run_settings, e, s, out / "runs") for e, s in order}
    else:
        # each process gets the env factory the config names, when this process registered it
        # (only that one: others registered here need not be picklable)
        name = load_config(settings.config, settings.overrides).env.factory
        registered = registered_env_factories()
        factories = {name: registered[name]} if name and name in registered else {}
        with study_pool(min(settings.jobs, len(pairs)), register_env_factories, (factories,)) as pool:
            futures = {(e, s): pool.submit(_run_one_safely, run_settings, e, s, out / "runs") for e, s in order}
            done = {}
            for pair, future in futures.items():
                try:
                    done[pair] = future.result()
                except Exception as exc:  # noqa: BLE001 - a worker process died (killed, out of memory)
                    done[pair] = f"worker process failed: {type(exc).__name__}: {exc}"
    results = [done[pair] for pair in pairs]
    finished = [r for r in results if not isinstance(r, str)]
    rows = [row for r in finished for row in r.rows]
    held_out = [r.held_out for r in finished if r.held_out is not None]
    failed = {seed_run_name(e, s): result for (e, s), result in zip(pairs, results) if isinstance(result, str)}
    return write_results(rows, settings, out, failed, objective, held_out)


LLM_DEFAULTS = {"estimators": "grpo,trca,trca_no_rf,trca_no_rb", "seeds": "0,1", "trajectories": 64, "target": 0.5,
                "output_dir": "runs/study", "jobs": 1}


def run(args: argparse.Namespace) -> int:
    """``rubricgym study`` with the LLM trainer (``--policy llm``); unset options take LLM_DEFAULTS."""
    values = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in LLM_DEFAULTS.items()}
    try:
        settings = StudySettings(estimators=[e for e in values["estimators"].split(",") if e],
                                 seeds=[int(s) for s in values["seeds"].split(",") if s],
                                 trajectories=values["trajectories"], target_success=values["target"],
                                 config=args.config, overrides=args.overrides, output_dir=values["output_dir"],
                                 jobs=values["jobs"], held_out=args.held_out)
    except ValueError as exc:
        print(f"rubricgym study: {exc}")
        return 2
    try:
        summary = run_study(settings)
    except UnmatchedStudy as exc:
        print(f"rubricgym study: {exc}")
        return 2
    print((Path(settings.output_dir) / "summary.md").read_text(encoding="utf-8"))
    print(f"results: {settings.output_dir}/study.csv, curves.png, curves.svg, summary.json")
    if summary["failed_runs"]:
        return 3
    return 0 if any(v is not None for v in summary["trajectories_to_target"].values()) else 1
