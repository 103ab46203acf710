"""Held-out success of an LLM study's warm starts: what its runs' held-out success is a change from.

``rubricgym study --policy llm --held-out`` evaluates every run after RL only. Each run keeps its
checkpoint at iteration 0 (after the warm start, before RL; the runs of one seed share it); this
evaluates that checkpoint on the same held-out tasks the same way (the trainer's greedy
evaluator), one per seed:

    python benchmarks/study_warm_start.py runs/study-llm-check --json OUT.json

``--set KEY=VALUE`` evaluates it under other settings (``--set env.max_steps=20``: would a longer
step budget have won more?); the run's own files are never changed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rubricgym.atomic_files import atomic_write_json


def warm_start_success(run: Path, overrides: Sequence[str] = ()) -> dict[str, object]:
    """Evaluate ``run``'s iteration-0 checkpoint on its held-out tasks (in a scratch copy), with
    ``overrides`` applied to the run's config."""
    from rubricgym.trainers.run_files import fork_run
    from rubricgym.trainers.trainer import Trainer

    start = run / "checkpoint-000000"
    if not start.is_dir():
        raise FileNotFoundError(f"{run} has no checkpoint at iteration 0")
    with tempfile.TemporaryDirectory() as scratch:
        copy = fork_run(run, start, Path(scratch) / run.name)
        trainer = Trainer.from_run_dir(copy, [*overrides, "run.progress=false"])
        try:
            iteration = trainer.iteration  # restored from the checkpoint: 0, before any RL update
            result = trainer.evaluate_held_out("after_warmup")
        finally:
            trainer.close()
    return {"iteration": iteration, "episodes": result.episodes, "successes": result.successes,
            "success_rate": result.success_rate, "return_mean": result.return_mean,
            "action_parsed_rate": result.action_parsed_rate, "steps_mean": result.steps_mean,
            "won": sorted(t.task_id for t in result.tasks if t.success)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", type=Path, help="the study's output folder (its runs/ holds one folder per run)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="evaluate under this setting instead of the run's (repeatable)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    from rubricgym.trainers.run_files import parse_seed_run_name

    seeds: dict[int, Path] = {}
    for run in sorted((args.study / "runs").iterdir()):
        named = parse_seed_run_name(run.name)
        if named and (run / "checkpoint-000000").is_dir():
            seeds.setdefault(named[1], run)  # a seed's runs share their warm start
    out = {"study": str(args.study), "overrides": args.overrides,
           "per_seed": {str(seed): {"run": run.name, **warm_start_success(run, args.overrides)}
                        for seed, run in sorted(seeds.items())}}
    text = json.dumps(out, indent=2)
    if args.json:
        atomic_write_json(args.json, out)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
