"""The offline AppWorld task set: committed scenario code (scenarios.py, world.py,
ground_truth.py), which ``../generate.py`` turns into a checked AppWorld data root at
set-up (run in AppWorld's venv)."""

from __future__ import annotations

from functools import cache
from typing import Any

from rubricgym.adapters.appworld.tasks.scenarios import build_variants


@cache
def load_catalog() -> tuple[dict[str, Any], ...]:
    """Every variant: id, scenario, split, apps, operations, instruction, ``good`` and ``bad``
    solutions (code cells, one per step) and its check. For tests, benchmarks and demos;
    never shown to agents. Set-up keeps only the variants AppWorld's evaluator confirmed
    (the adapter's ``task_ids()``)."""
    return tuple(v.as_dict() for v in build_variants())
