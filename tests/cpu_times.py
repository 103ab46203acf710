"""Each test's CPU seconds, when ``RUBRICGYM_TEST_CPU_TIMES`` names a folder: its worker's own and
those of the processes it started and waited for (servers, ranks, CLIs), around the test's
whole protocol (set-up, call, tear-down). On a saturated machine wall times swing by half
between runs; CPU seconds say what a test costs. ``benchmarks/suite_durations.py --cpu``
reads the files (one JSON line a test, a file a worker). A process whose parent does not wait
for it (a sandboxed server whose launcher is killed first) is not counted: the kernel adds a
child's CPU to its parent only when the parent reaps it."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "RUBRICGYM_TEST_CPU_TIMES"


@dataclass(frozen=True)
class Clock:
    """CPU seconds of this process, of its waited-for children, and the monotonic time."""

    own: float
    children: float
    wall: float

    @classmethod
    def now(cls) -> Clock:
        t = os.times()
        return cls(t.user + t.system, t.children_user + t.children_system, time.monotonic())


def record(folder: Path, nodeid: str, start: Clock, end: Clock) -> None:
    """Append one test's row to this worker's file in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    row = {"test": nodeid, "own_cpu_s": round(end.own - start.own, 3),
           "children_cpu_s": round(end.children - start.children, 3), "wall_s": round(end.wall - start.wall, 3)}
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(folder / f"cpu-times-{worker}.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
