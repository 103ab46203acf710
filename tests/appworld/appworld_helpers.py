"""Helpers shared by the AppWorld tests."""

from __future__ import annotations

import json
import time
from functools import cache

from rubricgym.adapters.appworld.paths import offline_data_root
from rubricgym.adapters.appworld.tasks import load_catalog


def run_cells(env, task_id: str, cells: list[str], fenced: bool = False):
    """Reset to ``task_id`` and send each cell as one response; returns the last step's result."""
    obs, info = env.reset(options={"task_id": task_id})
    result = None
    for i, cell in enumerate(cells):
        response = f"Step {i}.\n```python\n{cell}\n```" if fenced else f"<think>step {i}</think><action>{cell}</action>"
        result = env.step(response)
        if result[2] or result[3]:
            break
    return obs, info, result


TASKS = load_catalog()  # every variant scenarios.py defines


@cache
def accepted_ids() -> frozenset[str]:
    """Variants that set-up confirmed with AppWorld's evaluator (the generated index)."""
    index = json.loads((offline_data_root() / "rubricgym_index.json").read_text())
    return frozenset(t["id"] for t in index["tasks"])


def task(scenario: str) -> dict:
    """The first accepted variant of a scenario."""
    return next(t for t in TASKS if t["scenario"] == scenario and t["id"] in accepted_ids())


def process_gone(pid: int, within_s: float = 20.0) -> bool:
    """True once ``pid`` has exited (or is a zombie) within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False
