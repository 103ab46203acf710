"""Gold replays through gym.make (shared by the tests; importable as a helper module)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.adapters.tau_bench import engine as tau
from rubricgym.adapters.tau_bench.expert import final_message, gold_actions, gold_replay

ENV_IDS = {"retail": "TauBench-Retail-Rubric-v0", "airline": "TauBench-Airline-Rubric-v0",
           "telecom": "TauBench-Telecom-Rubric-v0", "mock": "TauBench-Mock-Rubric-v0"}
MAX_FINAL = 4  # closing messages sent until the scripted user stops (patience 2 -> at most 3)


def make(domain: str, reward: Any = None, **kwargs: Any) -> gym.Env:
    return gym.make(ENV_IDS[domain], reward=reward, max_steps=200, **kwargs)


def replay(env: gym.Env, task_id: str, drop: int | None = None, actions: list[str] | None = None,
           seed: int = 0, judgments: list[dict[str, int]] | None = None) -> tuple[float, list[Any], dict[str, Any]]:
    """Reset to ``task_id``, play the gold actions (minus ``drop``) then closing messages until the end.

    Returns tau2's reward (the env reward, without rubric shaping; nan when the episode did not end or the engine failed), the
    transitions and the last info; each step's TRCA judgments are appended to ``judgments``."""
    env.reset(seed=seed, options={"task_id": task_id})
    task = env.unwrapped.adapter.task
    plan = gold_replay(task, drop) if actions is None else actions
    info: dict[str, Any] = {}
    reward, done, n_final = 0.0, False, 0
    steps = list(plan)
    while steps or (not done and n_final < MAX_FINAL):
        text = steps.pop(0) if steps else final_message(task)
        if not steps and text == final_message(task):
            n_final += 1
        _, reward, term, trunc, info = env.step(f"<think>gold</think><action>{text}</action>")
        done = term or trunc
        if judgments is not None and "trca" in info:
            judgments.append(dict(info["trca"]["judgments"]))
        if done:
            break
    env_reward = info["transition"].env_reward if "transition" in info else 0.0  # tau2's reward, without shaping
    return (float(env_reward) if done and not info.get("environment_failure") else float("nan")), \
        env.unwrapped.trajectory.transitions, info


def mutating_gold_indices(env: gym.Env) -> list[int]:
    """Gold calls (by index) that changed a database fingerprint when the finished replay's
    tool calls are executed again, in order, on a fresh environment in the task's initial state."""
    adapter = env.unwrapped.adapter
    task, orch = adapter.task, adapter.orchestrator
    fresh = adapter.domain.environment()
    init = task.initial_state
    fresh.set_state(initialization_data=init.initialization_data if init else None,
                    initialization_actions=init.initialization_actions if init else None,
                    message_history=list(init.message_history or []) if init else [])
    history = len(init.message_history or []) if init else 0
    calls = [tc for m in orch.trajectory[history:] if isinstance(m, (tau.AssistantMessage, tau.UserMessage)) and m.tool_calls
             for tc in m.tool_calls]
    gold = gold_actions(task)
    assert len(calls) == len(gold), (task.id, [c.name for c in calls], [a.name for a in gold])
    changed = []
    before = tau.db_fingerprint(fresh)
    for i, call in enumerate(calls):
        fresh.get_response(call)
        after = tau.db_fingerprint(fresh)
        if after != before:
            changed.append(i)
        before = after
    return changed
