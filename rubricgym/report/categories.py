"""Operator categories for a report: which category each operator of a record's library has.

A TRCA record names its library (``library``: the library's ``name:``, or a path); the
categories come from that file, found among the libraries the registered benchmarks ship
(their specs'). Reward records themselves are read through ``rubricgym.records``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from rubricgym.registration import BENCHMARKS, UnknownBenchmark, get_spec
from rubricgym.yaml_files import YamlFileError, read_yaml_file

__all__ = ["UNKNOWN_CATEGORY", "operator_categories"]

UNKNOWN_CATEGORY = "uncategorized"


def _spec_library(benchmark: str | None) -> Path | None:
    """The library a benchmark's plugin spec ships, if any."""
    if not benchmark:
        return None
    try:
        path = get_spec(benchmark).operator_library
    except UnknownBenchmark:  # a file of a benchmark not installed here only costs the categories
        return None
    return Path(path) if path is not None else None


def _registered_libraries() -> list[Path]:
    return sorted({Path(s.operator_library) for s in BENCHMARKS.values() if s.operator_library is not None})


@lru_cache(maxsize=64)
def _read_categories(path: str) -> tuple[str, dict[str, str]]:
    try:
        data = read_yaml_file(path) or {}
    except (OSError, YamlFileError):
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
    for path in ([own] if own is not None else []) + _registered_libraries():
        name, cats = _read_categories(str(path.resolve()))
        if name == library:
            return cats
    return {}
