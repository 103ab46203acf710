"""``rubricgym report PATH``: write the HTML report of a run folder, an eval folder or a trajectory file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rubricgym.report.build import write_report
from rubricgym.report.sources import is_eval_dir, is_run_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="a run folder (rubricgym train's output), an eval folder "
                        "(rubricgym eval's) or a trajectory .jsonl file")
    parser.add_argument("--out", type=Path, default=None,
                        help="HTML file to write (default: report.html in the run folder, or FILE.html)")
    parser.add_argument("--max-iterations", type=int, default=6,
                        help="runs: embed the trajectories of at most this many iterations (evenly spaced)")
    parser.add_argument("--max-groups", type=int, default=4, help="runs: at most this many groups per iteration")
    parser.add_argument("--max-trajectories", type=int, default=200,
                        help="eval folders and trajectory files: at most this many")


def run(args: argparse.Namespace) -> int:
    if not args.path.exists():
        print(f"rubricgym report: {args.path} does not exist", file=sys.stderr)
        return 2
    if is_run_dir(args.path):
        options = {"max_iterations": args.max_iterations, "max_groups": args.max_groups}
    elif is_eval_dir(args.path) or args.path.is_file():
        options = {"max_trajectories": args.max_trajectories}
    else:
        print(f"rubricgym report: {args.path} is neither a run folder (config.yaml / metrics.jsonl), an eval folder "
              "(episodes.jsonl) nor a file",
              file=sys.stderr)
        return 2
    out = write_report(args.path, args.out, **options)
    print(out)
    return 0
