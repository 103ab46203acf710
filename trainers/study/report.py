"""The choice study's files: what the runs show, with intervals over seeds.

``curves.csv`` (one row per label, seed and iteration), ``held_out.csv`` (one per label and
seed), ``summary.json`` and ``summary.md`` (per label: the rise of its curve, area under the
curve, final and held-out success, trajectories to the target, wall time; paired comparisons
against GRPO; the λ sweep; the success-scarcity diagnostics), ``curves.png``, ``lambda.png``
and ``diagnostics.png``. Nothing is adjusted: a band that includes zero is reported as such.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from rubricgym.trainers.run_files import write_run_file
from rubricgym.trainers.study.choice import ChoiceStudySettings, RunRecord, parse_label
from rubricgym.trainers.study.statistics import (Band, area_under_curve, band, format_band, paired_comparison, rise,
                                                 trajectories_to_target)

__all__ = ["CURVE_FIELDS", "HELD_OUT_FIELDS", "summarize", "write_report"]

DIAGNOSTICS = ("failed_share", "groups_without_success", "judged_share_in_failures")
CURVE_FIELDS = ("label", "estimator", "lam", "seed", "iteration", "trajectories", "success_rate", "return_mean",
                "steps_mean", *DIAGNOSTICS, "nonzero_advantage_share")
HELD_OUT_FIELDS = ("label", "estimator", "lam", "seed", "env_id", "episodes", "successes", "success_rate")
BASELINE = "grpo"
PAPER_DIAGNOSTICS = {"failed_share": 0.965, "groups_without_success": 0.856, "judged_share_in_failures": 0.722}


def _per_seed(records: list[RunRecord], settings: ChoiceStudySettings) -> dict[str, dict[str, dict[int, float]]]:
    """label -> metric -> seed -> value."""
    out: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    w = settings.window
    for r in records:
        xs = [row["trajectories"] for row in r.rows]
        ys = [row["success_rate"] for row in r.rows]
        m = out[r.label]
        m["auc"][r.seed] = area_under_curve(xs, ys)
        m["final"][r.seed] = float(np.mean(ys[-w:]))
        m["start"][r.seed] = float(np.mean(ys[:w]))
        if len(ys) >= 2 * w:
            m["rise"][r.seed] = rise(ys, w)
        m["held_out"][r.seed] = float(r.held_out["success_rate"])
        m["wall_s"][r.seed] = r.wall_s
        hit = trajectories_to_target(xs, ys, settings.target_success, window=w)
        m["to_target"][r.seed] = float(hit) if hit is not None else float("nan")
    return out


def _mean_curve(records: list[RunRecord], key: str) -> dict[str, list[tuple[int, Band]]]:
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for row in r.rows:
            by[r.label][int(row["trajectories"])].append(float(row[key]))
    return {label: [(t, band(v)) for t, v in sorted(points.items())] for label, points in by.items()}


def summarize(records: list[RunRecord], settings: ChoiceStudySettings, failed: dict[str, str]) -> dict[str, Any]:
    per = _per_seed(records, settings)
    curves = _mean_curve(records, "success_rate")
    labels = [label for label in settings.labels() if label in per]
    table: dict[str, Any] = {}
    for label in labels:
        m = per[label]
        curve = curves[label]
        mean_hit = trajectories_to_target([t for t, _ in curve], [b.mean for _, b in curve], settings.target_success,
                                          window=settings.window)
        reached = [v for v in m["to_target"].values() if not np.isnan(v)]
        table[label] = {
            "seeds": sorted(m["auc"]),
            "rise": band(list(m["rise"].values())).as_dict() if m["rise"] else None,
            "start_success": band(list(m["start"].values())).as_dict(),
            "final_success": band(list(m["final"].values())).as_dict(),
            "auc": band(list(m["auc"].values())).as_dict(),
            "held_out_success": band(list(m["held_out"].values())).as_dict(),
            "trajectories_to_target_of_the_mean_curve": mean_hit,
            "seeds_reaching_target": len(reached),
            "wall_s_mean": float(np.mean(list(m["wall_s"].values()))),
        }
    comparisons: dict[str, Any] = {}
    if BASELINE in per:
        for label in labels:
            if label == BASELINE:
                continue
            comparisons[label] = {}
            for metric in ("auc", "final", "held_out"):
                comparisons[label][metric] = paired_comparison(per[label][metric], per[BASELINE][metric]).as_dict()
    sweep = []
    for label in labels:
        name, lam = parse_label(label)
        fixed = {"trca": 0.8, "trca_no_rf": 1.0, "trca_no_rb": 0.0}
        if name == "trca" and lam is not None or (lam is None and name in fixed):
            sweep.append({"label": label, "lambda": lam if lam is not None else fixed[name],
                          "auc": table[label]["auc"], "final_success": table[label]["final_success"],
                          "held_out_success": table[label]["held_out_success"]})
    sweep.sort(key=lambda row: row["lambda"])
    diagnostics = {}
    for key in DIAGNOSTICS:
        first = [r.rows[0][key] for r in records if r.rows]
        allrows = [row[key] for r in records for row in r.rows]
        diagnostics[key] = {"first_iteration": band(first).as_dict() if first else None,
                            "all_iterations_mean": float(np.mean(allrows)) if allrows else None,
                            "paper": PAPER_DIAGNOSTICS[key]}
    return {"name": settings.name, "env_id": settings.env_id, "settings": settings.model_dump(mode="json"),
            "iterations": settings.iterations, "trajectories_per_iteration": settings.group_size * settings.tasks_per_iteration,
            "estimators": table, "paired_vs_grpo": comparisons, "lambda_sweep": sweep, "diagnostics": diagnostics,
            "failed_runs": failed, "runs": len(records)}


def _csv(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> str:
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(fields), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return table.getvalue()


def markdown(summary: dict[str, Any]) -> str:
    s = summary["settings"]
    lines = [f"# {summary['name']}: {summary['env_id']}, {summary['runs']} runs",
             "",
             f"{summary['iterations']} iterations x {summary['trajectories_per_iteration']} trajectories; "
             f"seeds {s['seeds']}; success target {s['target_success']}; windows of {s['window']} iterations. "
             "Values in % over seeds: mean [95% t-interval].",
             "",
             "| run | rise of the training curve | final success | area under the curve | held-out success | "
             "trajectories to target (mean curve) | wall s |",
             "|---|---|---|---|---|---|---|"]
    for label, row in summary["estimators"].items():
        lines.append(f"| `{label}` | {format_band(row['rise'])} | {format_band(row['final_success'])} | "
                     f"{format_band(row['auc'])} | {format_band(row['held_out_success'])} | "
                     f"{row['trajectories_to_target_of_the_mean_curve'] or 'not reached'}"
                     f" ({row['seeds_reaching_target']}/{len(row['seeds'])} seeds) | {row['wall_s_mean']:.0f} |")
    if summary["paired_vs_grpo"]:
        lines += ["", "Paired against `grpo` (same seeds): difference in points, [95% interval], exact sign-flip p, "
                  "paired t p, seeds better/worse.", "",
                  "| run | area under the curve | final success | held-out success |", "|---|---|---|---|"]
        for label, c in summary["paired_vs_grpo"].items():
            cells = [f"{format_band(c[m]['difference'])}, p={c[m]['p_sign_flip']:.3f} / {c[m]['p_t_test']:.3f}, "
                     f"{c[m]['better']}/{c[m]['worse']}" for m in ("auc", "final", "held_out")]
            lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    if summary["lambda_sweep"]:
        lines += ["", "λ sweep (TRCA): area under the curve and final success", "", "| λ | run | AUC | final |",
                  "|---|---|---|---|"]
        lines += [f"| {row['lambda']:g} | `{row['label']}` | {format_band(row['auc'])} | "
                  f"{format_band(row['final_success'])} |"
                  for row in summary["lambda_sweep"]]
    lines += ["", "Success-scarcity diagnostics (first iteration, all runs; the paper's early-training values beside)",
              "", "| diagnostic | first iteration | mean over training | TRCA paper |", "|---|---|---|---|"]
    for key, d in summary["diagnostics"].items():
        lines.append(f"| {key} | {format_band(d['first_iteration'])} | {100 * (d['all_iterations_mean'] or 0):.1f} | "
                     f"{100 * d['paper']:.1f} |")
    if summary["failed_runs"]:
        lines += ["", *[f"failed run `{k}`: {v}" for k, v in summary["failed_runs"].items()]]
    return "\n".join(lines) + "\n"


def plots(records: list[RunRecord], summary: dict[str, Any], out: Path) -> list[str]:
    import matplotlib  # optional: the report extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional: the report extra

    written = []
    curves = _mean_curve(records, "success_rate")
    fig, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
    for label in summary["estimators"]:
        points = curves[label]
        xs = [t for t, _ in points]
        ax.plot(xs, [b.mean for _, b in points], label=label)
        ax.fill_between(xs, [b.low for _, b in points], [b.high for _, b in points], alpha=0.15)
    ax.axhline(summary["settings"]["target_success"], color="grey", linestyle="--", linewidth=1)
    ax.set(xlabel="training trajectories", ylabel="training success rate",
           title=f"{summary['name']}: success vs trajectories (band: 95% t-interval over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(out / "curves.png", dpi=110)
    plt.close(fig)
    written.append("curves.png")
    if summary["lambda_sweep"]:
        fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
        sweep = summary["lambda_sweep"]
        for key, name in (("auc", "area under the curve"), ("final_success", "final success")):
            xs = [row["lambda"] for row in sweep]
            ax.errorbar(xs, [row[key]["mean"] for row in sweep],
                        yerr=[[row[key]["mean"] - row[key]["low"] for row in sweep],
                              [row[key]["high"] - row[key]["mean"] for row in sweep]], marker="o", capsize=3, label=name)
        ax.set(xlabel="λ (0: r_F only ... 1: r_B only)", ylabel="success", title=f"{summary['name']}: TRCA's λ")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.savefig(out / "lambda.png", dpi=110)
        plt.close(fig)
        written.append("lambda.png")
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), constrained_layout=True)
    for ax, key in zip(axes, DIAGNOSTICS, strict=True):
        by = _mean_curve(records, key)
        for label in summary["estimators"]:
            points = by[label]
            ax.plot([t for t, _ in points], [b.mean for _, b in points], label=label)
        ax.axhline(PAPER_DIAGNOSTICS[key], color="grey", linestyle="--", linewidth=1)
        ax.set(title=key.replace("_", " "), xlabel="training trajectories")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.savefig(out / "diagnostics.png", dpi=110)
    plt.close(fig)
    written.append("diagnostics.png")
    return written


def write_report(records: list[RunRecord], settings: ChoiceStudySettings, failed: dict[str, str]) -> dict[str, Any]:
    out = Path(settings.output_dir)
    rows = [{"label": r.label, "estimator": r.estimator, "lam": r.lam, "seed": r.seed, **row}
            for r in sorted(records, key=lambda r: (r.label, r.seed)) for row in r.rows]
    write_run_file(out / "curves.csv", _csv(rows, CURVE_FIELDS))
    held = [{"label": r.label, "estimator": r.estimator, "lam": r.lam, "seed": r.seed, **r.held_out}
            for r in sorted(records, key=lambda r: (r.label, r.seed))]
    write_run_file(out / "held_out.csv", _csv(held, HELD_OUT_FIELDS))
    summary = summarize(records, settings, failed)
    summary["plots"] = plots(records, summary, out) if records else []
    write_run_file(out / "summary.json", json.dumps(summary, indent=2))
    write_run_file(out / "summary.md", markdown(summary))
    return summary
