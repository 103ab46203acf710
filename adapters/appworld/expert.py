"""AppWorld's expert player (``spec.expert``): the committed good solution of an offline task.

The offline variants' solutions live in the scenario code (``tasks/scenarios.py``), never
under the data root the server reads, and set-up kept only variants whose good solution
AppWorld's own evaluator passed. The official splits' solutions are AppWorld's licensed
data, not shipped here: their tasks get an empty plan.
"""

from __future__ import annotations

from rubricgym.adapters.appworld.adapter import AppWorldAdapter
from rubricgym.adapters.appworld.tasks import load_catalog


def expert_actions(adapter: AppWorldAdapter) -> list[str]:
    """The current task's good solution, one code block per step (the last completes the task)."""
    if adapter.task_id is None:
        raise RuntimeError("reset() first")
    return next((list(t["good"]) for t in load_catalog() if t["id"] == adapter.task_id), [])
