"""The ``reward=`` argument of ``gym.make``: turning what a user names into reward wrappers.

``reward`` is ``None``/``"none"`` (the engine's reward only), ``"default"`` (the benchmark's
shipped TRCA library), a library path, a reward spec (``TRCAConfig``, ``JudgeRewardSpec``, any
object with ``component(env, context)``), a component, or a list of these, each optionally as
``(spec, weight)``; an object with only ``wrap(env, context)`` builds its own wrapper. Specs build their components from the ``RewardContext`` of the env's
benchmark, so nothing here looks a benchmark up by name.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym

from rubricgym.rewards import RewardComponent, RewardContext, RewardSpec, RubricReward
from rubricgym.trca.wrapper import TRCAConfig

__all__ = ["attach_reward", "build_component"]


def build_component(env: gym.Env[str, str], reward: Any, context: RewardContext) -> RewardComponent:
    """One component from a spec, a component, a library path or ``"default"``."""
    if isinstance(reward, RewardComponent):
        return reward
    if reward == "default":
        reward = TRCAConfig()
    elif isinstance(reward, str | os.PathLike):
        reward = TRCAConfig(library=os.fspath(reward))
    if isinstance(reward, RewardSpec):
        return reward.component(env, context)
    raise TypeError(
        "a reward is 'none', 'default', a library path, a reward spec (TRCAConfig, JudgeRewardSpec, or any "
        f"object with component(env, context)), a component, or a list of these; got {type(reward).__name__}"
    )


def attach_reward(env: gym.Env[str, str], reward: Any, context: RewardContext) -> gym.Env[str, str]:
    """``env`` with ``reward`` attached (see the module docstring); one ``RubricReward`` holds
    every component, so each component's record is observable."""
    if reward is None or reward == "none":
        return env
    if not isinstance(reward, RewardSpec | RewardComponent) and callable(getattr(reward, "wrap", None)):
        return reward.wrap(env, context)  # a spec that builds its own wrapper
    items = list(reward) if isinstance(reward, list | tuple) and not _is_weighted_pair(reward) else [reward]
    components = [(build_component(env, spec, context), weight) for spec, weight in map(_spec_and_weight, items)]
    return RubricReward(env, components)


def _is_weighted_pair(reward: Any) -> bool:
    return isinstance(reward, tuple) and len(reward) == 2 and isinstance(reward[1], int | float)


def _spec_and_weight(item: Any) -> tuple[Any, float]:
    return (item[0], float(item[1])) if _is_weighted_pair(item) else (item, 1.0)
