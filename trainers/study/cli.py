"""``rubricgym study``: sample efficiency of advantage estimators at matched trajectory budgets.

Two policies: ``--policy choice`` (the default for evidence on a CPU: a small learned policy
over the admissible actions, ``rubricgym.trainers.choice_policy``; everything in the study's
YAML config, docs/study.md) and ``--policy llm`` (the LoRA LLM through the trainer, per
estimator and seed, from a training config). Options given here override the config's.

    rubricgym study --policy choice --config configs/study_choice_alfworld.yaml
    rubricgym study --policy llm --config configs/study_alfworld_cpu.yaml --estimators grpo,trca --seeds 0,1,2
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.estimators import estimator_names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", choices=("choice", "llm"), default="llm",
                        help="choice: the small policy over admissible actions (config: a choice study YAML); "
                             "llm: the LoRA LLM trainer (config: a training YAML)")
    parser.add_argument("--config", help="the study's YAML config (choice) or the training config every run shares (llm)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="llm: config override for every run (repeatable)")
    parser.add_argument("--estimators", default=None,
                        help="comma-separated estimator names, of: " + ", ".join(estimator_names())
                        + " (the draco* ones need a judge configured)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds")
    parser.add_argument("--trajectories", type=int, default=None, help="trajectory budget of every run")
    parser.add_argument("--target", type=float, default=None, help="success rate whose budget is reported")
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--jobs", type=int, default=None, help="runs trained at once, each in its own process")
    parser.add_argument("--held-out", action="store_true",
                        help="llm: evaluate every run on the held-out tasks after training (choice runs always are)")
    parser.add_argument("--report-only", action="store_true", help="choice: rewrite the report from the finished runs")


def _choice_overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.estimators is not None:
        out["estimators"] = [e for e in args.estimators.split(",") if e]
    if args.seeds is not None:
        out["seeds"] = [int(s) for s in args.seeds.split(",") if s]
    for flag, key in (("trajectories", "trajectories"), ("target", "target_success"), ("output_dir", "output_dir"),
                      ("jobs", "jobs")):
        if getattr(args, flag) is not None:
            out[key] = getattr(args, flag)
    return out


def run_choice(args: argparse.Namespace) -> int:
    from rubricgym.trainers.study.choice import load_choice_study, run_choice_study  # lazy CLI: torch, engines
    from rubricgym.trainers.study.report import write_report  # lazy CLI: matplotlib

    if not args.config:
        print("rubricgym study: --policy choice needs --config: a choice study's YAML (configs/study_choice_*.yaml)")
        return 2
    try:
        settings = load_choice_study(args.config, _choice_overrides(args))
    except (ValueError, ValidationError, OSError) as exc:
        print(f"rubricgym study: {exc}")
        return 2
    if args.report_only:
        from rubricgym.trainers.study.choice import read_records  # lazy CLI: as above

        records, failed = read_records(settings), {}
    else:
        records, failed = run_choice_study(settings)
    summary = write_report(records, settings, failed)
    print((Path(settings.output_dir) / "summary.md").read_text(encoding="utf-8"))
    print(f"results: {settings.output_dir}/curves.csv, held_out.csv, summary.json, summary.md, "
          + ", ".join(summary.get("plots", [])))
    return 3 if failed else 0


def run(args: argparse.Namespace) -> int:
    if args.policy == "choice":
        return run_choice(args)
    from rubricgym.trainers.study import llm  # lazy CLI: the LLM trainer

    return llm.run(args)
