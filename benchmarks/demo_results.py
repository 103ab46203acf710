"""The main job's measured result, derived from its run folder.

Run the main job, then point this at the folder it printed:

    make demo                     # = .venv/bin/python -m rubricgym.cli train
    .venv/bin/python benchmarks/demo_results.py runs/<name> --json benchmarks/results/demo_cpu.json

It reads the run's ``summary.json`` (the three held-out evaluations with Wilson intervals,
wall time, load average), ``evaluations.json`` (per task), ``warmup.json`` and
``config.yaml``, and states whether the target was met: held-out success after RL above
after the warm start's (RL must help, not merely keep what the warm start gave), within 25
minutes. Nothing is recomputed or adjusted here.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

import yaml

LABELS = ("before", "after_warmup", "after")


def _default_threads() -> str:
    """For runs whose summary predates ``torch_threads``: what ``run.threads: null`` means here."""
    from rubricgym.trainers.trainer import default_threads

    return f"{default_threads()} (run.threads unset: the usable CPUs, at most 2)"


DEMO_COMMAND = "make demo  (= .venv/bin/python -m rubricgym.cli train, embedded defaults)"
ITERATION_KEYS = ("iteration", "success_rate", "trca_reward_mean", "return_mean", "action_parsed_rate", "kl",
                  "entropy", "time/iteration_s")


def iteration_lines(run_dir: Path) -> list[dict[str, Any]]:
    """The RL iterations' training metrics (the "rl" phase of ``metrics.jsonl``, as
    ``Trainer.read_metrics`` reads it)."""
    from rubricgym.trainers.run_files import read_metrics_lines
    from rubricgym.trainers.trainer import METRICS_FILE

    return [{k: m[k] for k in ITERATION_KEYS if k in m} for m in read_metrics_lines(run_dir / METRICS_FILE)
            if m.get("phase", "rl") == "rl"]


def demo_record(run_dir: Path, command: str = DEMO_COMMAND) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    evaluations = json.loads((run_dir / "evaluations.json").read_text(encoding="utf-8"))
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    missing = [label for label in LABELS if label not in summary]
    if missing:
        raise ValueError(f"{run_dir}: the summary lacks the evaluation(s) {missing}; run the main job to the end")
    after, warm = summary["after"], summary["after_warmup"]
    import torch

    return {
        "benchmark": "demo_cpu",
        "command": command,
        "date": summary.get("finished_at"),
        "run_dir": summary["run_dir"],
        "device": "cpu" if not torch.cuda.is_available() else torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": summary.get("torch_threads") or config["run"].get("threads") or _default_threads(),
        "wall_s": round(summary["wall_s"], 1),
        "wall_note": "warm start, three evaluations and RL; the model load (about 10 s) is not included",
        "load_average_start": summary.get("load_average_start"),
        "load_average_end": summary.get("load_average_end"),
        "eval_split": summary["eval_split"],
        "eval_held_out": summary["eval_held_out"],
        "eval_decoding": summary["eval_decoding"],
        "eval_tasks": summary["eval_tasks"],
        "evaluations": {label: summary[label] for label in LABELS},
        "per_task_success": {label: {t["task_id"]: t["success"] for t in evaluations[label]["tasks"]}
                             for label in LABELS},
        "warmup": summary.get("warmup", {}),
        "rl": {"iterations": summary["iterations"], "advantage": summary["advantage"],
               "trained_samples": summary["trained_samples"], "final_kl": summary["final_kl"],
               "distinct_group_share": summary["distinct_group_share"],
               "entropy_first_iteration": summary.get("rl_entropy_first"),
               "per_iteration": iteration_lines(run_dir)},
        "target": {
            "success_after_rl_above_warm_start": after["success_rate"] > warm["success_rate"],
            "within_25_min": summary["wall_s"] <= 25 * 60,
        },
        "config": config,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path, help="the main job's run folder (printed at its end)")
    ap.add_argument("--json", dest="out", default=None, help="write the result here (JSON)")
    ap.add_argument("--command", default=DEMO_COMMAND, help="the command the run was made with (default: make demo)")
    args = ap.parse_args(argv)
    record = demo_record(args.run_dir, args.command)
    record["target"]["met"] = all(record["target"].values())
    text = json.dumps(record, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(json.dumps({k: record[k] for k in ("evaluations", "wall_s", "target")}, indent=2))
    return record


if __name__ == "__main__":
    main(sys.argv[1:])
