"""Attach a reward to a ``RubricEnv``: none, a TRCA operator library, or any reward spec.

A reward spec is any object with ``wrap(env, benchmark) -> gym.Env`` (``TRCAConfig`` is one;
the DRACO judge builds its own), so new reward kinds plug in without changing this file.
"""

from __future__ import annotations

import os
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym


@runtime_checkable
class RewardSpec(Protocol):
    def wrap(self, env: gym.Env, benchmark: str) -> gym.Env: ...


def attach_reward(env: gym.Env, reward: Any, benchmark: str) -> gym.Env:
    """``reward``: None/"none" (engine reward only); "default" (the benchmark's shipped TRCA
    library; an error says so when none ships); a path to a library file; or a reward spec."""
    from rubricgym.trca.wrapper import TRCAConfig

    if reward is None or reward == "none":
        return env
    if isinstance(reward, RewardSpec):
        return reward.wrap(env, benchmark)
    if reward == "default":
        return TRCAConfig().wrap(env, benchmark)
    if isinstance(reward, str | os.PathLike):
        return TRCAConfig(library=os.fspath(reward)).wrap(env, benchmark)
    raise TypeError(
        f"reward must be None, 'none', 'default', a library path, or an object with "
        f"wrap(env, benchmark); got {type(reward).__name__}"
    )
