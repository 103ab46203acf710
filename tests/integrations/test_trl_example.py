"""examples/trl_alfworld.py runs to completion: one TRL step with the tiny model."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from integrations.trl_setup import need_trl_stack

EXAMPLE = Path(__file__).parents[2] / "examples" / "trl_alfworld.py"


@pytest.mark.slow
def test_the_example_trains_one_step(tmp_path):
    need_trl_stack()
    spec = importlib.util.spec_from_file_location("trl_alfworld", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    result = example.main(["--model", "tiny", "--steps", "1", "--group", "2", "--max-steps", "2",
                           "--max-new-tokens", "16", "--max-completion-length", "512", "--output-dir", str(tmp_path)])
    assert result["steps"] == 1 and result["episodes"] == 2
    assert 2 <= result["env_steps"] <= 4 and result["loss"] is not None
