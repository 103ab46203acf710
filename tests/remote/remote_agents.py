"""An agent for ``rubricgym eval --policy callable`` against a served ALFWorld env
(importable as ``remote.remote_agents:alfworld_expert``: tests/ is on the path)."""

from __future__ import annotations

from functools import cache

import gymnasium as gym

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.registration import get_spec


@cache
def _plan(task_id: str) -> tuple[str, ...]:
    """ALFWorld's expert plan for the task, computed on a local env (the served one is elsewhere)."""
    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT

    env = gym.make("ALFWorld-Rubric-v0", reward="none", data_path=str(BUNDLED_ROOT))
    try:
        adapter = env.unwrapped.adapter
        env.reset(seed=0, options={"task_id": task_id})
        return tuple(adapter.grammar.render(a) for a in get_spec("ALFWorld-Rubric-v0").load_expert()(adapter))
    finally:
        env.close()


def alfworld_expert(messages, task_id):
    """The k-th answer is the plan's k-th step."""
    done = sum(1 for m in messages if m["role"] == "assistant")
    plan = _plan(task_id)
    return plan[done] if done < len(plan) else plan[-1]
