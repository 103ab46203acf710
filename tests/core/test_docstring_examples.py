"""The examples in the public API's docstrings run as written (doctest)."""

from __future__ import annotations

import doctest
import importlib

import pytest

PUBLIC = [
    "rubricgym", "rubricgym.jsonl", "rubricgym.contract", "rubricgym.parsing", "rubricgym.records",
    "rubricgym.rewards", "rubricgym.credit.grpo", "rubricgym.credit.trca", "rubricgym.estimators.group", "rubricgym.judges.structured", "rubricgym.untrusted",
    "rubricgym.credit.placement", "rubricgym.prompts", "rubricgym.vector", "rubricgym.env_factories", "rubricgym.yaml_files",
    "rubricgym.trainers.statistics",
]


@pytest.mark.parametrize("name", PUBLIC)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run with -s to see)"
