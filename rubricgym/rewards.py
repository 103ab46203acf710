"""Attach a reward to a ``RubricEnv``: none, an operator library, or (later) a judge."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


def attach_reward(env: gym.Env, reward: Any, benchmark: str) -> gym.Env:
    """``reward``: "none"/None (engine reward only), "default" (the benchmark's shipped
    operator library, when it has one), or a path to an operator-library file."""
    if reward in (None, "none"):
        return env
    if reward == "default":
        return env  # replaced by the TRCA wrapper once operator libraries exist
    raise NotImplementedError(f"reward={reward!r} is not supported yet")
