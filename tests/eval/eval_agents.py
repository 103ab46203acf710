"""Agents for ``rubricgym eval --policy callable`` (importable as ``eval_agents:NAME``)."""

from __future__ import annotations

from functools import cache

import gymnasium as gym

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.registration import get_spec


@cache
def _plan(env_id: str, task_id: str) -> tuple[str, ...]:
    """The benchmark's expert plan for the task, rendered in the env's action format."""
    env = gym.make(env_id, reward="none")
    try:
        adapter = env.unwrapped.adapter
        env.reset(seed=0, options={"task_id": task_id})
        return tuple(adapter.grammar.render(a) for a in get_spec(env_id).load_expert()(adapter))
    finally:
        env.close()


def expert(messages, env_id, task_id):
    """Plays the expert plan: the k-th answer is the plan's k-th step."""
    done = sum(1 for m in messages if m["role"] == "assistant")
    plan = _plan(env_id, task_id)
    return plan[done] if done < len(plan) else plan[-1]


def junk(messages):
    """Answers with no action at all, every turn."""
    return "I am not sure what to do here."


def broken(messages):
    raise RuntimeError("this agent always fails")


_EPISODES = [0]  # episodes this worker process has started (one at a time: --concurrency 1)


def expert_then_junk(messages, env_id, task_id):
    """Even episodes of this worker play the expert plan, odd ones answer junk: two samples of
    one task that a judge can tell apart."""
    if not any(m["role"] == "assistant" for m in messages):
        _EPISODES[0] += 1
    return expert(messages, env_id, task_id) if _EPISODES[0] % 2 else "junk junk junk"


def slow_expert(messages, env_id, task_id):
    """The expert, a little slow (0.3 s a turn): episodes stay in flight long enough to be
    interrupted."""
    import time

    time.sleep(0.3)
    return expert(messages, env_id, task_id)
