"""The offline AppWorld task set: committed specs (catalog.yaml, ground_truth.py) and the
generator that turns them into an AppWorld data root at set-up (run in AppWorld's venv)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

CATALOG = Path(__file__).with_name("catalog.yaml")


@cache
def load_catalog() -> tuple[dict[str, Any], ...]:
    """Authored task specs: id, apps, operations, instruction, ``good`` and ``bad`` solutions
    (lists of code cells, one per step). For tests, benchmarks and demos; never shown to agents."""
    with CATALOG.open(encoding="utf-8") as fh:
        return tuple(yaml.safe_load(fh)["tasks"])
