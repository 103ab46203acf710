"""``rubricgym train``: GRPO with rubric rewards.

With no arguments it runs the main job on embedded defaults: SmolLM2-135M-Instruct, TRCA
rewards, the bundled ALFWorld games, a few CPU-sized iterations (a GPU is used when present).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from rubricgym.estimators import estimator_names
from rubricgym.registration import BenchmarkNotInstalled
from rubricgym.secret_refs import install_log_redaction, redact
from rubricgym.trainers.config import TrainConfig, dump_config, load_config
from rubricgym.trainers.preflight import SetupError, check_endpoint, check_env, check_model_name, validation_message


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
    parser.add_argument("--dry-run", action="store_true", help="check the config, the env (id, modules, data), the "
                        "model name and any server it names, then exit: no model is loaded, nothing is written")
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
    lines.append(f"  {summary.get('trained_samples', 0)} step samples trained; last KL to the reference "
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


def load_train_config(args: argparse.Namespace, overrides: list[str]) -> TrainConfig:
    """The run's config (a file and overrides, or a resumed run's own); anything wrong is a
    ``SetupError``: the setting, the value, the fix (pydantic's own text and links never shown)."""
    if args.resume:
        if args.config:
            raise SetupError("--resume uses the run's own config", f"--config {args.config}", "drop --config")
        if not Path(args.resume).is_dir():
            raise SetupError(f"--resume {args.resume}: no such run folder", None,
                             "name a folder rubricgym train wrote (it prints it: 'Run directory: ...')")
        # lazy CLI: the checkpoint reader loads torch; only a resumed run needs it here
        from rubricgym.trainers.checkpoint import CheckpointError
        from rubricgym.trainers.run_files import load_run_config
        from rubricgym.trainers.trainer import CONFIG_FILE

        try:
            return _validated(lambda: load_run_config(Path(args.resume), CONFIG_FILE, overrides))
        except CheckpointError as exc:
            raise SetupError(f"cannot resume: {redact(str(exc))}", None, None) from None
    return _validated(lambda: load_config(args.config, overrides))


def _validated(load: Callable[[], TrainConfig]) -> TrainConfig:
    try:
        return load()
    except ValidationError as exc:
        raise SetupError(f"bad configuration: {redact(validation_message(exc))}", None,
                         "rubricgym train --print-config shows every setting and its default") from None
    except (ValueError, OSError) as exc:
        raise SetupError(f"bad configuration: {redact(str(exc))}", None, None) from None


def preflight(config: TrainConfig, dry_run: bool) -> list[str]:
    """Before any run folder or model: the env is made once (its id, modules and data); with
    ``--dry-run`` also the model name, the generation server and the judge's endpoint."""
    env = config.env
    if env.factory:
        lines = [f"env factory {env.factory}: registered (made when the run starts)"]
    elif env.url:
        check_endpoint(env.url, "env.url")
        lines = [f"env {env.id} served at {env.url}: a server answers"]
    else:
        lines = [f"env {env.id}: {check_env(env.id, env.kwargs)}'s modules and data present"]
    if not dry_run:
        return lines
    check_model_name(config.model.name, "model.name")
    lines.append(f"model {config.model.name}: found (not loaded)")
    if config.generation.backend == "openai" and config.generation.server_url:
        check_endpoint(config.generation.server_url, "generation.server_url")
        lines.append(f"generation server {config.generation.server_url}: a server answers")
    judge_url = config.judge.options.get("base_url")
    if judge_url:
        check_endpoint(str(judge_url), "judge.options.base_url")
        lines.append(f"judge {judge_url}: a server answers")
    if config.judge.config and not Path(config.judge.config).is_file():
        raise SetupError("judge.config names no file", config.judge.config, "name the judge's YAML settings file")
    return lines


def _new_entries(folder: Path, before: set[str]) -> None:
    """Remove the empty folders a failed start created under ``folder`` (nothing left behind)."""
    for entry in folder.iterdir() if folder.is_dir() else ():
        if entry.name not in before and entry.is_dir():
            with contextlib.suppress(OSError):  # not empty (something was written), or another rank's
                entry.rmdir()


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=os.environ.get("RUBRICGYM_LOG", "WARNING"))
    install_log_redaction()  # keys this process reads never reach the log
    overrides = _overrides(args)
    if args.dry_run:
        sys.dont_write_bytecode = True  # a dry run writes nothing, not even an imported callable's __pycache__
    try:
        config = load_train_config(args, overrides)
        if args.print_config:
            print(dump_config(config), end="")
            return 0
        lines = preflight(config, args.dry_run)
    except (SetupError, BenchmarkNotInstalled, LookupError) as exc:
        print(f"rubricgym train: {redact(str(exc))}", file=sys.stderr)
        return 2
    if args.dry_run:
        for line in lines:
            print(f"rubricgym train --dry-run: {line}")
        print(f"rubricgym train --dry-run: ready ({config.run.iterations} iterations -> {config.run.output_dir}); "
              "nothing was loaded or written")
        return 0
    return train(args, config, overrides)


def train(args: argparse.Namespace, config: TrainConfig, overrides: list[str]) -> int:
    """Build the trainer and run it: its start line, the summary, or why it stopped."""
    # lazy CLI: torch and the trainer load only when a run starts (`rubricgym train --help` stays fast)
    from torch.distributed import DistError

    from rubricgym.trainers.checkpoint import CheckpointError
    from rubricgym.trainers.parallel.ranks import RankFailure
    from rubricgym.trainers.trainer import Trainer

    output = Path(config.run.output_dir)
    before = {p.name for p in output.iterdir()} if output.is_dir() else set()
    try:
        if args.resume:
            trainer = Trainer.from_run_dir(args.resume, overrides)
        else:
            trainer = Trainer(config)
    except CheckpointError as exc:
        print(f"rubricgym train: cannot resume: {redact(str(exc))}", file=sys.stderr)
        return 2
    except (FileNotFoundError, LookupError, RuntimeError, ValueError, ImportError, NotImplementedError) as exc:
        if not args.resume:
            _new_entries(output, before)
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
