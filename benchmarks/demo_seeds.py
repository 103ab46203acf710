"""Is the main job's RL gain more than luck? Its RL phase, repeated from one warm start over seeds.

    .venv/bin/python benchmarks/demo_seeds.py --output-dir runs/demo-seeds \\
        --json benchmarks/results/demo_seeds_cpu.json        # the defaults: TRCA x 5 seeds, GRPO x 3
    .venv/bin/python benchmarks/demo_seeds.py ... --set algorithm.lr=1e-4 --set run.iterations=10

The warm start runs once (``OUTPUT/warm-start``: its checkpoint at iteration 0, ``warmup.json``
and the held-out evaluations before and after it). Every (estimator, seed) run starts from a copy
of that checkpoint with ``run.seed`` and ``algorithm.advantage`` set (the RL sampling and update
streams derive from ``run.seed``; the warm start and the KL reference are the same for all),
trains the RL phase and is evaluated greedily on the same held-out tasks. The *gain* of a run is
its held-out success after RL minus the success after the warm start. Per estimator the JSON
holds each seed's gain and their mean with a 95% t-interval (``rubricgym.trainers.study.
statistics.band``); seeds both estimators ran are also compared pairwise.

It resumes: a finished run keeps ``result.json`` and is not run again, an unfinished one
resumes from its own newest checkpoint, and the warm start is not repeated once it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rubricgym.atomic_files import atomic_write_json

WARM_START = "warm-start"
RESULT_FILE = "result.json"
#: what a run folder starts from: the warm start's files (its checkpoint is copied separately)
COPIED_FILES = ("config.yaml", "warmup.json", "evaluations.json")


def _success(evaluations: dict[str, Any], label: str) -> dict[str, Any]:
    result = evaluations[label]
    return {"successes": int(result["successes"]), "episodes": int(result["episodes"]),
            "success_rate": float(result["success_rate"])}


def warm_start(out: Path, config_path: str | None, overrides: list[str]) -> Path:
    """The shared warm start (run once; a folder without its finished checkpoint is redone)."""
    from rubricgym.trainers.checkpoint import latest_checkpoint  # torch loads here, not for --help
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    folder = out / WARM_START
    if (folder / "warmup.json").is_file() and latest_checkpoint(folder) is not None:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    config = load_config(config_path, [*overrides, f"run.output_dir={out}", f"run.name={WARM_START}",
                                       "warmup.enabled=true", "warmup.evaluate=true"])
    trainer = Trainer(config)
    try:
        trainer.warm_start()
    finally:
        trainer.close()
    return folder


def run_seed(out: Path, warm: Path, estimator: str, seed: int, overrides: list[str]) -> dict[str, Any]:
    """One RL phase from the shared warm start; its ``result.json`` (kept: not run again)."""
    from rubricgym.trainers.checkpoint import latest_checkpoint
    from rubricgym.trainers.run_files import fork_run, seed_run_name
    from rubricgym.trainers.trainer import Trainer

    folder = out / seed_run_name(estimator, seed)
    finished = folder / RESULT_FILE
    if finished.is_file():
        return json.loads(finished.read_text(encoding="utf-8"))
    if latest_checkpoint(folder) is None:  # nothing to resume: start from a copy of the warm start
        fork_run(warm, latest_checkpoint(warm), folder, COPIED_FILES)
    started = time.perf_counter()
    trainer = Trainer.from_run_dir(folder, [*overrides, f"run.seed={seed}", f"algorithm.advantage={estimator}",
                                            f"run.output_dir={out}", f"run.name={folder.name}",
                                            "run.evaluate_after=true"])
    try:
        summary = trainer.train()
        evaluations = trainer.evaluations()
        per_iteration = [{k: m.get(k) for k in ("iteration", "success_rate", "trca_reward_mean", "kl")}
                         for m in trainer.read_metrics()]
    finally:
        trainer.close()
    after_warm, after = _success(evaluations, "after_warmup"), _success(evaluations, "after")
    result = {"estimator": estimator, "seed": seed, "after_warmup": after_warm, "after": after,
              "gain": after["success_rate"] - after_warm["success_rate"],
              "per_task_after": {t["task_id"]: bool(t["success"]) for t in evaluations["after"].get("tasks", [])},
              "iterations": summary.get("iterations"), "per_iteration": per_iteration,
              "wall_s": time.perf_counter() - started}
    finished.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def aggregate(results: list[dict[str, Any]], reference: str = "trca", baseline: str = "grpo") -> dict[str, Any]:
    """Per estimator: seeds, gains, their mean and 95% t-interval; ``reference`` vs ``baseline``
    paired on the seeds both ran (recorded as the studies record a comparison)."""
    from rubricgym.trainers.study.statistics import band, paired_comparison

    by: dict[str, dict[int, float]] = {}
    for r in results:
        by.setdefault(r["estimator"], {})[int(r["seed"])] = float(r["gain"])
    estimators = {}
    for name, gains in by.items():
        b = band([gains[s] for s in sorted(gains)])
        estimators[name] = {"seeds": sorted(gains), "gains": [gains[s] for s in sorted(gains)], "mean": b.mean,
                            "ci95": [b.low, b.high], "interval_excludes_zero": b.excludes_zero}
    out: dict[str, Any] = {"estimators": estimators}
    if reference in by and baseline in by and len(set(by[reference]) & set(by[baseline])) > 1:
        c = paired_comparison(by[reference], by[baseline])
        # better/worse: how many seeds' gains are above/below the baseline's
        out["paired"] = {"pair": f"{reference} - {baseline}", **c.as_dict()}
    return out


def code_version() -> dict[str, Any]:
    """Which code produced the numbers: the checkout's commit (None outside a git checkout), whether
    its tracked files had changes, and the installed rubricgym version."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    try:
        installed: str | None = version("rubricgym")
    except PackageNotFoundError:
        installed = None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "tracked_changes": None if status is None else bool(status),
            "rubricgym": installed}


def _seeds(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=None, help="training config (default: the main job's embedded defaults)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--seeds", type=_seeds, default=[0, 1, 2, 3, 4], help="seeds of --advantage (default 0-4)")
    ap.add_argument("--advantage", default="trca")
    ap.add_argument("--baseline", default="grpo", help="the episode-level estimator to compare ('' : none)")
    ap.add_argument("--baseline-seeds", type=_seeds, default=[0, 1, 2])
    ap.add_argument("--output-dir", type=Path, default=Path("runs/demo-seeds"))
    ap.add_argument("--json", type=Path, default=None, help="write the result here (default: print it)")
    args = ap.parse_args(argv)

    started, load_start = time.perf_counter(), os.getloadavg()
    code = code_version()  # the code this process imported: later commits must not be credited with its numbers
    args.output_dir.mkdir(parents=True, exist_ok=True)
    warm = warm_start(args.output_dir, args.config, args.overrides)
    warm_record = json.loads((warm / "warmup.json").read_text(encoding="utf-8"))
    plan = [(args.advantage, s) for s in args.seeds]
    if args.baseline:
        plan += [(args.baseline, s) for s in args.baseline_seeds]
    results = [run_seed(args.output_dir, warm, est, seed, args.overrides) for est, seed in plan]
    import torch

    report = {
        "benchmark": "demo_seeds", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__,
                    "torch_threads": torch.get_num_threads()},
        "code": code,
        "load_average_start": list(load_start), "load_average_end": list(os.getloadavg()),
        "wall_s_this_invocation": time.perf_counter() - started,
        "warm_start": {k: warm_record.get(k) for k in ("games", "demonstrations", "recovery_demonstrations",
                                                          "dagger_demonstrations", "dagger", "steps", "loss_first",
                                                          "loss_last", "policy_entropy", "eval_split")},
        "held_out_tasks": warm_record.get("eval_tasks"),
        "before": warm_record.get("before"), "after_warmup": warm_record.get("after"),
        "gain": "held-out success after RL minus after the warm start (same tasks, greedy)",
        **aggregate(results, args.advantage, args.baseline), "runs": results,
    }
    report["target"] = {"met": bool(report["estimators"][args.advantage]["interval_excludes_zero"]
                                    and report["estimators"][args.advantage]["mean"] > 0),
                        "rule": f"the 95% interval of {args.advantage}'s mean gain excludes zero, above it"}
    if args.json:
        atomic_write_json(args.json, report)  # never half a file, even when stopped while writing
    else:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
