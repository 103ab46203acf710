"""The suite's CPU-time recorder (tests/cpu_times.py) and its report (benchmarks/suite_durations.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from cpu_times import Clock, record

ROOT = Path(__file__).resolve().parents[2]
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n"


def _suite_durations():
    spec = importlib.util.spec_from_file_location("suite_durations", ROOT / "benchmarks" / "suite_durations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_waited_child_s_cpu_is_counted_as_the_test_s(tmp_path):
    start = Clock.now()
    subprocess.run([sys.executable, "-c", BURN], check=True)
    record(tmp_path, "tests/core/test_x.py::test_burn", start, Clock.now())
    (path,) = tmp_path.glob("cpu-times-*.jsonl")
    row = json.loads(path.read_text())
    assert row["test"] == "tests/core/test_x.py::test_burn"
    assert row["children_cpu_s"] >= 0.25 and row["wall_s"] >= 0.25  # the child burnt 0.3 CPU s
    assert row["own_cpu_s"] < row["children_cpu_s"]


def test_the_report_sums_workers_and_children_by_folder(tmp_path, capsys):
    rows = {"gw0": [("tests/trainer/test_a.py::test_one", 1.0, 9.0), ("tests/core/test_b.py::test_two", 2.0, 0.0)],
            "gw1": [("tests/trainer/test_c.py::test_three", 3.0, 1.0)]}
    for worker, tests in rows.items():
        (tmp_path / f"cpu-times-{worker}.jsonl").write_text("".join(
            json.dumps({"test": t, "own_cpu_s": own, "children_cpu_s": kids, "wall_s": 1.0}) + "\n"
            for t, own, kids in tests))
    assert _suite_durations().main(["--cpu", f"r={tmp_path}", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "== r: 3 tests, 16 CPU s (6 in the workers, 10 in the processes they waited for)" in out
    assert "      14.0  trainer" in out and "       2.0  core" in out
    top = out.split("top 2 tests")[1].splitlines()[1:3]
    assert [line.split()[-1] for line in top] == ["tests/trainer/test_a.py::test_one",
                                                  "tests/trainer/test_c.py::test_three"]
