"""Shipped TRCA operator libraries, one YAML file per benchmark (``rubricgym.operator_libraries``).

A benchmark's library is the one its spec names (``get_spec(name).operator_library``, or
``rubricgym.registration.operator_library(name)``); this package only holds the files.
Validate one with ``rubricgym library validate PATH --env ENV_ID``; the format is in docs/trca.md.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["LIBRARY_DIR", "shipped_libraries"]

LIBRARY_DIR = Path(__file__).parent


def shipped_libraries() -> list[Path]:
    """Every library file shipped with rubricgym, sorted by name."""
    return sorted(p for p in LIBRARY_DIR.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
