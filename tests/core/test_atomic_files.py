"""Result files replaced whole: a benchmark that fails while writing keeps its previous result."""

from __future__ import annotations

import json

import pytest

from rubricgym.atomic_files import atomic_write_json


def test_json_is_written_indented_with_a_final_newline(tmp_path):
    path = atomic_write_json(tmp_path / "results" / "speed.json", {"ratio": 1.5, "runs": [1, 2]})
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == {"ratio": 1.5, "runs": [1, 2]}
    assert text.endswith("}\n") and '\n  "ratio": 1.5' in text


def test_a_result_that_cannot_be_written_leaves_the_previous_one_and_no_temporary_file(tmp_path):
    path = atomic_write_json(tmp_path / "speed.json", {"ratio": 1.5})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"ratio": object()})
    assert json.loads(path.read_text(encoding="utf-8")) == {"ratio": 1.5}
    assert [p.name for p in tmp_path.iterdir()] == ["speed.json"]
