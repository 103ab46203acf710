"""Issue 28, item 8: files without an end, nested without a bottom, or not text are a clear
error naming the file (and line), never a hang, a ``MemoryError`` or a ``RecursionError``."""

from __future__ import annotations

from pathlib import Path

import pytest

from rubricgym.cli import main
from rubricgym.contract import load_jsonl
from rubricgym.jsonl import JsonLinesError, iter_json_lines
from rubricgym.judges.rubric import load_rubric
from rubricgym.secret_refs import read_secret
from rubricgym.trainers.config import load_config
from rubricgym.trca.library import read_library_file
from rubricgym.yaml_files import MAX_YAML_DEPTH, YamlFileError, nesting_depth

DEEP_YAML = "a: " + "[" * 5000 + "]" * 5000 + "\n"  # past Python's recursion limit in PyYAML's composer
DEEPISH_YAML = "a: " + "[" * 200 + "]" * 200 + "\n"  # parses, but far deeper than any real file


@pytest.mark.timeout(120)
def test_a_trajectory_file_with_no_line_end_is_an_error_naming_the_line():
    with pytest.raises(JsonLinesError, match=r"/dev/zero:1: not a trajectory: line longer than"):
        load_jsonl("/dev/zero")


@pytest.mark.timeout(60)
def test_skipping_reader_stops_at_a_line_with_no_end_and_says_so():
    problems: list[str] = []
    rows = list(iter_json_lines("/dev/zero", errors="skip", problems=problems, max_line_bytes=1 << 20))
    assert rows == [] and problems == ["zero:1: not a JSON object (line longer than 1048576 bytes); "
                                       "the rest of the file is not read"]


@pytest.mark.timeout(60)
def test_a_key_file_with_no_end_is_refused():
    with pytest.raises(ValueError, match="/dev/zero: a key file must be under"):
        read_secret(file="/dev/zero")


def test_a_key_file_that_is_not_text_is_refused(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"\xff\xfe\x00sk")
    with pytest.raises(ValueError, match="key file is not UTF-8"):
        read_secret(file=path)


@pytest.mark.parametrize("text", [DEEP_YAML, DEEPISH_YAML])
def test_deep_yaml_is_a_clear_error_in_every_reader(tmp_path, text):
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    message = f"deep.yaml: nested deeper than {MAX_YAML_DEPTH} levels"
    with pytest.raises(YamlFileError, match=message):
        load_config(path)
    with pytest.raises(ValueError, match=message):
        read_library_file(path)
    with pytest.raises(ValueError, match=message):
        load_rubric(path)
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_YAML_DEPTH} levels"):
        load_config(None, ["env.kwargs=" + text[3:].strip()])


def test_yaml_that_is_not_utf8_or_not_yaml_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"model:\n  name: \xff\n")
    with pytest.raises(YamlFileError, match=r"bad.yaml: not UTF-8 text \(byte 15\)"):
        load_config(path)
    path.write_text("model:\n  name: [unclosed\nrun: {}\n")
    with pytest.raises(YamlFileError, match=r"bad.yaml: not valid YAML \(line \d\)"):
        load_config(path)


@pytest.mark.timeout(60)
def test_a_config_file_with_no_end_is_refused():
    with pytest.raises(YamlFileError, match="/dev/zero: larger than"):
        load_config(Path("/dev/zero"))


def test_nesting_depth_is_measured_without_recursion():
    value: list = []
    for _ in range(100_000):
        value = [value]
    assert nesting_depth(value) == 100_001 and nesting_depth({"a": [1, {"b": 2}]}) == 3 and nesting_depth(3) == 0


def test_the_report_reads_metrics_with_nan_and_overflowing_numbers(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("model:\n  name: tiny\n")
    (run / "metrics.jsonl").write_text(
        '{"iteration": 1, "phase": "rl", "success_rate": NaN, "loss": 1e400, "trained_tokens": 5}\n'
        '{"iteration": 2, "phase": "rl", "success_rate": 0.5, "loss": -Infinity}\n')
    out = tmp_path / "report.html"
    assert main(["report", str(run), "--out", str(out)]) == 0
    assert out.is_file() and "Traceback" not in capsys.readouterr().err
