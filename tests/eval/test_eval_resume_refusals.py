"""``rubricgym eval --resume`` over a folder it cannot use refuses cleanly (issue 54, item 5):
exit 2 with what is wrong and where, no traceback, nothing played."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _resume(out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rubricgym.cli", "eval", "--env", "SearchQA-Rubric-v0", "--n", "1",
                           "--policy", "callable", "--callable", "eval_agents:junk", "--out", str(out), "--resume"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**__import__("os").environ, "PYTHONPATH": "tests/eval"})


@pytest.mark.parametrize(("name", "content", "message"), [
    ("bad_json", '{"task_id": "t", "sample": 0}\n{not json\n', "episodes.jsonl:2: not an episode record"),
    ("not_a_record", '{"a": 1}\n', "episodes.jsonl:1: not an episode record: no task_id and sample"),
    ("huge_line", None, "episodes.jsonl:1: not an episode record"),
], ids=["bad_json", "not_a_record", "huge_line"])
def test_unreadable_records_exit_2_with_the_line(tmp_path, name, content, message):
    out = tmp_path / name
    out.mkdir()
    (out / "episodes.jsonl").write_text(content if content is not None else "x" * (100 << 20) + "\n")
    done = _resume(out)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (out / "summary.json").exists()


def test_result_files_that_are_links_outside_the_folder_are_refused(tmp_path):
    out = tmp_path / "linked"
    out.mkdir()
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    (out / "episodes.jsonl").symlink_to(target)
    done = _resume(out)
    assert done.returncode == 2 and "links leading outside" in done.stderr and "Traceback" not in done.stderr
    assert target.read_text() == ""
