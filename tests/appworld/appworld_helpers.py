"""Helpers shared by the AppWorld tests."""

from __future__ import annotations

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


TASKS = load_catalog()
