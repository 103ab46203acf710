"""The test suite's durations, before and after a change: top tests and per-folder totals.

Each run is a JUnit XML file written by ``pytest --junitxml=FILE`` (with or without xdist:
a test's time is its own, whichever worker ran it) plus the wall time of the command.

    python benchmarks/suite_durations.py --run before=BEFORE.xml:2285 --run after=AFTER.xml:1190 \\
        --out benchmarks/results/suite_durations.txt

A run made with ``RUBRICGYM_TEST_CPU_TIMES=DIR`` (tests/cpu_times.py) also recorded each test's
CPU seconds, its worker's and its waited-for children's: ``--cpu LABEL=DIR`` reports them the same
way. Wall times swing by half between runs on a saturated machine; CPU seconds much less.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def test_times(junit: Path) -> dict[str, float]:
    """nodeid-like name -> seconds, for every test case in the file."""
    out: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        out[f"{case.get('classname', '')}::{case.get('name', '')}"] = float(case.get("time", 0.0))
    return out


def cpu_times(folder: Path) -> dict[str, tuple[float, float]]:
    """nodeid -> (own CPU s, children's CPU s), from every worker's file in ``folder``."""
    out: dict[str, tuple[float, float]] = {}
    for path in sorted(folder.glob("cpu-times-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            out[row["test"]] = (float(row["own_cpu_s"]), float(row["children_cpu_s"]))
    return out


def folder_of(name: str) -> str:
    """``tests.<folder>.test_x::name`` (JUnit) or ``tests/<folder>/test_x.py::name`` (a node id)."""
    parts = name.split("::")[0].replace("/", ".").split(".")
    return parts[1] if parts[0] == "tests" and len(parts) > 2 else parts[0]


def report(label: str, junit: Path, wall_s: float | None, top: int) -> list[str]:
    times = test_times(junit)
    folders: Counter[str] = Counter()
    for name, seconds in times.items():
        folders[folder_of(name)] += seconds
    lines = [f"== {label}: {len(times)} tests, {sum(times.values()):.0f} s of test time"
             + (f", {wall_s:.0f} s wall ({wall_s / 60:.1f} min)" if wall_s else ""),
             "per folder (seconds of test time):"]
    lines += [f"  {seconds:8.1f}  {folder}" for folder, seconds in folders.most_common()]
    lines.append(f"top {top} tests:")
    lines += [f"  {seconds:8.1f}  {name}" for name, seconds in sorted(times.items(), key=lambda kv: -kv[1])[:top]]
    return lines


def cpu_report(label: str, folder: Path, top: int) -> list[str]:
    times = cpu_times(folder)
    total = {name: own + children for name, (own, children) in times.items()}
    folders: Counter[str] = Counter()
    for name, seconds in total.items():
        folders[folder_of(name)] += seconds
    lines = [f"== {label}: {len(times)} tests, {sum(total.values()):.0f} CPU s "
             f"({sum(own for own, _ in times.values()):.0f} in the workers, "
             f"{sum(children for _, children in times.values()):.0f} in the processes they waited for)",
             "per folder (CPU seconds):"]
    lines += [f"  {seconds:8.1f}  {name}" for name, seconds in folders.most_common()]
    lines.append(f"top {top} tests (CPU seconds: all = worker + children):")
    lines += [f"  {total[name]:8.1f} = {times[name][0]:7.1f} + {times[name][1]:7.1f}  {name}"
              for name in sorted(total, key=lambda n: -total[n])[:top]]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[],
                        help="LABEL=JUNIT.xml[:WALL_SECONDS], once per run, in order")
    parser.add_argument("--cpu", action="append", default=[],
                        help="LABEL=DIR: the CPU times a run with RUBRICGYM_TEST_CPU_TIMES=DIR wrote")
    parser.add_argument("--top", type=int, default=50)
    parser.add_argument("--note", action="append", default=[], help="a line written under the title")
    parser.add_argument("--out", type=Path, help="file to write (default: print)")
    args = parser.parse_args(argv)
    if not args.run and not args.cpu:
        parser.error("give at least one --run or --cpu")
    lines = ["Test suite durations (benchmarks/suite_durations.py)", *args.note, ""]
    for run in args.run:
        label, _, rest = run.partition("=")
        path, _, wall = rest.partition(":")
        lines += report(label, Path(path), float(wall) if wall else None, args.top) + [""]
    for run in args.cpu:
        label, _, path = run.partition("=")
        lines += cpu_report(label, Path(path), args.top) + [""]
    text = "\n".join(lines)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
