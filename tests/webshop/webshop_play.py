"""Episode helpers shared by the WebShop tests (imported as ``webshop.webshop_play``)."""

from __future__ import annotations


def wrap_action(command: str) -> str:
    """An agent response in the default protocol."""
    return f"<think>next</think><action>{command}</action>"


def play(env, task_id: str, actions, seed: int = 0):
    """Reset to ``task_id`` and play ``actions``; returns (last info, step infos)."""
    env.reset(seed=seed, options={"task_id": task_id})
    infos = []
    info = {}
    for action in actions:
        _, _, terminated, truncated, info = env.step(wrap_action(action))
        infos.append(info)
        if terminated or truncated:
            break
    return info, infos
