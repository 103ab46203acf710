"""Reading the reward records a transition carries, in old and new file layouts.

Every reward component writes its record under ``info["rubric"][<component>]``; older
files carry TRCA's record at ``info["trca"]`` and a judge's at ``info["judge"]``. Readers
here try the new place first, so a report works on files of either age.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

UNKNOWN_CATEGORY = "uncategorized"


def component(info: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The record of reward component ``name`` (``info["rubric"][name]``, else ``info[name]``)."""
    rubric = info.get("rubric")
    if isinstance(rubric, Mapping) and isinstance(rubric.get(name), Mapping):
        return dict(rubric[name])
    legacy = info.get(name)
    return dict(legacy) if isinstance(legacy, Mapping) else None


def trca_record(info: Mapping[str, Any]) -> dict[str, Any] | None:
    """TRCA's record: the component named ``trca``, else any component carrying judgments."""
    record = component(info, "trca")
    if record is not None:
        return record
    rubric = info.get("rubric")
    if isinstance(rubric, Mapping):
        for value in rubric.values():
            if isinstance(value, Mapping) and isinstance(value.get("judgments"), Mapping):
                return dict(value)
    return None


def judge_record(info: Mapping[str, Any]) -> dict[str, Any] | None:
    """A rubric judge's record: the component named ``judge``, else any carrying verdicts."""
    record = component(info, "judge")
    if record is not None:
        return record
    rubric = info.get("rubric")
    if isinstance(rubric, Mapping):
        for value in rubric.values():
            if isinstance(value, Mapping) and isinstance(value.get("verdicts"), list):
                return dict(value)
    return None


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def trca_step_reward(record: Mapping[str, Any]) -> float | None:
    """r_TRCA of a step (new records name it ``reward``, old ones ``r_TRCA``)."""
    return _number(record.get("r_TRCA", record.get("reward")))


# -- operator categories from the library files ---------------------------------------------
def _spec_library(benchmark: str | None) -> Path | None:
    """The library a benchmark's plugin spec ships, if any."""
    if not benchmark:
        return None
    try:
        from rubricgym.registration import get_spec

        path = get_spec(benchmark).operator_library
    except Exception:  # an unknown or broken plugin only costs the categories
        return None
    return Path(path) if path is not None else None


def _shipped_libraries() -> list[Path]:
    try:
        folder = resources.files("rubricgym.operator_libraries")
        return sorted(Path(str(p)) for p in folder.iterdir() if str(p).endswith((".yaml", ".yml")))
    except (ModuleNotFoundError, FileNotFoundError):
        return []


@lru_cache(maxsize=64)
def _read_categories(path: str) -> tuple[str, dict[str, str]]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return "", {}
    if not isinstance(data, dict):
        return "", {}
    ops = data.get("operators") or []
    cats = {str(op.get("id")): str(op.get("category", UNKNOWN_CATEGORY))
            for op in ops if isinstance(op, dict) and op.get("id") is not None}
    return str(data.get("name", "")), cats


def operator_categories(library: str | None, benchmark: str | None = None) -> dict[str, str]:
    """Operator id -> category for the library a record names (its ``name:``, or a path);
    without a name, the benchmark's own library. Empty when no file matches."""
    if library and Path(library).is_file():
        return _read_categories(str(Path(library).resolve()))[1]
    own = _spec_library(benchmark)
    if library is None:
        return _read_categories(str(own.resolve()))[1] if own is not None else {}
    for path in ([own] if own is not None else []) + _shipped_libraries():
        name, cats = _read_categories(str(path.resolve()))
        if name == library:
            return cats
    return {}
