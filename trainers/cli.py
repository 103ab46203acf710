"""``rubricgym train``: GRPO with rubric rewards.

With no arguments it runs the main job on embedded defaults: SmolLM2-135M-Instruct, TRCA
rewards, the bundled ALFWorld games, a few CPU-sized iterations (a GPU is used when present).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from rubricgym.estimators import estimator_names
from rubricgym.secret_refs import install_log_redaction, redact


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML config file (sections: model, lora, env, prompt, generation, "
                                         "algorithm, judge, run)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting, e.g. --set algorithm.group_size=8 (repeatable)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    parser.add_argument("--iterations", type=int, help="= --set run.iterations=N")
    parser.add_argument("--advantage", help="= --set algorithm.advantage=NAME, one of: " + ", ".join(estimator_names()))
    parser.add_argument("--model", help="= --set model.name=NAME_OR_PATH")
    parser.add_argument("--device", help="= --set model.device=DEVICE")
    parser.add_argument("--output-dir", help="= --set run.output_dir=DIR")
    parser.add_argument("--stop-after", type=int, help="stop after N iterations of this invocation (resumable)")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _overrides(args: argparse.Namespace) -> list[str]:
    items = list(args.overrides)
    for flag, key in (("iterations", "run.iterations"), ("advantage", "algorithm.advantage"),
                      ("model", "model.name"), ("device", "model.device"), ("output_dir", "run.output_dir")):
        value = getattr(args, flag)
        if value is not None:
            items.append(f"{key}={value}")
    if args.quiet:
        items.append("run.progress=false")
    return items


def format_summary(summary: dict) -> str:
    def pct(d: dict, k: str) -> str:
        return f"{100 * d[k]:.0f}%" if d.get(k) is not None else "n/a"

    def num(d: dict, k: str) -> str:
        return f"{d[k]:+.4f}" if d.get(k) is not None else "n/a"

    def success(d: dict, k: str) -> str:
        if "successes" not in d:
            return "n/a"
        return (f"{d['successes']}/{d['episodes']} {100 * d['success_rate']:.0f}% [{100 * d['success_ci95_low']:.0f}-"
                f"{100 * d['success_ci95_high']:.0f}%]")

    def steps(d: dict, k: str) -> str:
        return f"{d[k]:.1f}" if k in d else "n/a"

    warm = summary.get("warmup")
    lines = [f"Trained {summary['iterations']} iteration(s) with '{summary['advantage']}' advantages."]
    if warm:
        entropy = f", policy entropy {warm['policy_entropy']:.3f} nats" if "policy_entropy" in warm else ""
        lines.append(f"  warm start: {warm.get('steps')} steps on {warm.get('demonstrations')} expert demonstrations "
                     f"from {len(warm.get('games', []))} train games, loss {warm.get('loss_first', 0):.3f} -> "
                     f"{warm.get('loss_last', 0):.3f} ({warm.get('time_s', 0):.0f} s{entropy})")
    cols = [(name, summary[key]) for name, key in (("before", "before"), ("after warm start", "after_warmup"),
                                                    ("after RL", "after")) if key in summary]
    if cols:
        tasks = summary.get("eval_tasks", [])
        lines.append(f"  evaluated on {summary.get('eval_split', 'n/a')} ({len(tasks)} tasks, "
                     f"{summary.get('eval_decoding', 'n/a')} decoding):")
        lines.append("  " + " " * 22 + "".join(f"{name:>20}" for name, _ in cols))
        for label, key, fmt in (("success [95% Wilson]", "success_rate", success),
                                ("parsed <action>", "action_parsed_rate", pct),
                                ("mean TRCA reward", "trca_reward_mean", num), ("mean return", "return_mean", num),
                                ("mean steps", "steps_mean", steps)):
            lines.append(f"  {label:<22}" + "".join(f"{fmt(d, key):>20}" for _, d in cols))
    lines.append(f"  {summary.get('trained_samples', 0)} step samples trained; last KL to the base model "
                 f"{summary.get('final_kl', 0.0):.5f}; groups with differing rollouts "
                 f"{100 * summary.get('distinct_group_share', 0.0):.0f}%")
    if not summary.get("trained_samples") and summary["advantage"].startswith("trca"):
        lines.append("  (no step had a parsed <action> with a nonzero advantage: TRCA trains action tokens only,"
                     " so nothing was updated; see docs/trainer.md, 'Known limits')")
    if "wall_s" in summary:
        lines.append(f"  wall time {summary['wall_s'] / 60:.1f} min (warm start, evaluations and RL; load average "
                     f"{summary.get('load_average_end', [0])[0]:.2f} at the end)")
    lines.append(f"Run directory: {summary['run_dir']} (metrics.jsonl, evaluations.json, trajectories/, checkpoints, "
                 "tensorboard/)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=os.environ.get("RUBRICGYM_LOG", "WARNING"))
    install_log_redaction()  # keys this process reads never reach the log
    # lazy CLI: torch and the trainer load only when a run starts (`rubricgym train --help` stays fast)
    from torch.distributed import DistError

    from rubricgym.trainers.checkpoint import CheckpointError
    from rubricgym.trainers.config import dump_config, load_config
    from rubricgym.trainers.parallel.ranks import RankFailure
    from rubricgym.trainers.run_files import load_run_config
    from rubricgym.trainers.trainer import CONFIG_FILE, Trainer

    overrides = _overrides(args)
    try:
        if args.resume:
            if args.config:
                print("rubricgym train: --resume uses the run's own config; drop --config", file=sys.stderr)
                return 2
            if not Path(args.resume).is_dir():
                print(f"rubricgym train: --resume {args.resume}: no such run folder", file=sys.stderr)
                return 2
            config = load_run_config(Path(args.resume), CONFIG_FILE, overrides)
        else:
            config = load_config(args.config, overrides)
    except CheckpointError as exc:
        print(f"rubricgym train: cannot resume: {redact(str(exc))}", file=sys.stderr)
        return 2
    except (ValidationError, ValueError, OSError) as exc:
        print(f"rubricgym train: bad configuration: {redact(str(exc))}", file=sys.stderr)
        return 2
    if args.print_config:
        print(dump_config(config), end="")
        return 0
    try:
        if args.resume:
            trainer = Trainer.from_run_dir(args.resume, overrides)
        else:
            trainer = Trainer(config)
    except CheckpointError as exc:
        print(f"rubricgym train: cannot resume: {redact(str(exc))}", file=sys.stderr)
        return 2
    except (FileNotFoundError, LookupError, RuntimeError, ValueError, ImportError, NotImplementedError) as exc:
        print(f"rubricgym train: cannot start: {redact(str(exc))}", file=sys.stderr)
        return 2
    if args.resume and trainer.iteration >= config.run.iterations:  # nothing left: say so, train nothing
        trainer.close()
        print(f"rubricgym train: {args.resume} is already complete ({trainer.iteration}/{config.run.iterations} "
              "iterations); to train longer: --resume RUN_DIR --iterations N with N > "
              f"{config.run.iterations}")
        return 0
    main = trainer.ranks.is_main  # several processes: rank 0 speaks for the run
    if main:
        print(f"rubricgym train: {config.model.name} on {config.env.id if not config.env.factory else config.env.factory} "
              f"({len(trainer.tasks)} tasks, device {trainer.device}"
              f"{trainer.parallel.start_line()}), "
              f"advantage '{config.algorithm.advantage}', "
              f"{config.algorithm.tasks_per_iteration} tasks x G={config.algorithm.group_size}, "
              f"{config.run.iterations} iterations -> {trainer.run_dir}", flush=True)
    try:
        summary = trainer.train(stop_after=args.stop_after)
    except KeyboardInterrupt:
        print(f"\ninterrupted; resume with: rubricgym train --resume {trainer.run_dir}", file=sys.stderr)
        return 130
    except RankFailure as exc:
        print(f"rubricgym train: stopped: {redact(str(exc))}; resume with: rubricgym train --resume {trainer.run_dir}",
              file=sys.stderr, flush=True)
        return 3
    except DistError as exc:  # a collective inside the model (FSDP / ZeRO-3 hooks) lost a rank
        trainer.ranks.failed = True  # a group with a dead peer is left to the process exit
        print(f"rubricgym train: stopped: rank {trainer.ranks.rank} of {trainer.ranks.world_size}: a collective "
              f"inside the model failed - another rank died or did not answer within run.collective_timeout_s="
              f"{trainer.ranks.timeout_s:g} s ({redact(str(exc)).splitlines()[0][:300]}); resume with: rubricgym train "
              f"--resume {trainer.run_dir}", file=sys.stderr, flush=True)
        return 3
    finally:
        trainer.close()
    if not main:
        return 0
    if "stopped_after" in summary:
        print(f"stopped after iteration {summary['stopped_after']}; resume with: "
              f"rubricgym train --resume {summary['run_dir']}")
        return 0
    print(format_summary(summary))
    if os.environ.get("RUBRICGYM_SUMMARY_JSON"):
        print(json.dumps(summary))
    return 0
