"""Composable, observable rewards: any number of components on one env, each score visible.

A *reward component* scores each transition (a TRCA operator library, an LLM judge, your
own). ``RubricReward`` sums the weighted component rewards, adds the engine's own reward
when asked, and records every component under ``info["rubric"][<name>]`` — the same record
is stored in the transition (``transition.info["rubric"]``), so trajectories and the
trainer's step samples keep every part. Every record has one shape::

    {"reward": float, "weight": float, ...the component's parts...}

A *reward spec* is a config object that builds a component for an env (``TRCAConfig``,
``JudgeRewardSpec``); ``gym.make(id, reward=...)`` takes one spec, a list of them (weights
with ``(spec, weight)`` pairs), a library path, ``"default"`` or ``"none"``. An object with only ``wrap(env, benchmark)`` is
also accepted and builds its own wrapper.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym

from rubricgym.contract import Transition


@dataclass
class ComponentScore:
    """One component's score of one step: its reward and every part that produced it."""

    reward: float
    parts: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class RewardComponent(Protocol):
    """Scores transitions. ``keep_env_reward``: whether this component, alone, pays the
    engine's own reward on top of its score (TRCA: yes, the completion-aware return sums
    both; a judge: no, its verdict replaces the outcome)."""

    name: str
    keep_env_reward: bool

    def reset(self, info: Mapping[str, Any]) -> None: ...

    def score(self, transition: Transition, info: Mapping[str, Any]) -> ComponentScore: ...


@runtime_checkable
class RewardSpec(Protocol):
    """A config that builds a component for an env of a benchmark."""

    def component(self, env: gym.Env, benchmark: str) -> RewardComponent: ...


class RubricReward(gym.Wrapper):
    """Step reward = sum_c weight_c * reward_c (+ the engine reward when kept).

    ``keep_env_reward=None`` keeps the engine reward when any component keeps it (it is
    added once). ``info["env_reward"]`` always holds the engine's own reward;
    ``info["rubric"]`` the component records; ``info[<name>]`` aliases each record (so
    ``info["trca"]`` keeps working). Compose by listing components here, not by stacking
    ``RubricReward`` wrappers."""

    def __init__(self, env: gym.Env, components: Sequence[tuple[RewardComponent, float]],
                 keep_env_reward: bool | None = None):
        super().__init__(env)
        if not components:
            raise ValueError("RubricReward needs at least one component")
        names = [c.name for c, _ in components]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"reward components need distinct names; repeated: {dupes} (set name= on the spec)")
        self.components = [(c, float(w)) for c, w in components]
        self.keep_env_reward = (any(c.keep_env_reward for c, _ in self.components)
                                if keep_env_reward is None else bool(keep_env_reward))

    def component(self, name: str) -> RewardComponent:
        for comp, _ in self.components:
            if comp.name == name:
                return comp
        raise KeyError(f"no reward component {name!r} (have {[c.name for c, _ in self.components]})")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        for comp, _ in self.components:
            comp.reset(info)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        transition = info.get("transition")
        if not isinstance(transition, Transition):
            raise RuntimeError("RubricReward needs info['transition'] from a RubricEnv underneath")
        records: dict[str, dict[str, Any]] = {}
        total = float(env_reward) if self.keep_env_reward else 0.0
        for comp, weight in self.components:
            scored = comp.score(transition, info)
            records[comp.name] = {"reward": float(scored.reward), "weight": weight, **scored.parts}
            total += weight * float(scored.reward)
        rubric = {**transition.info.get("rubric", {}), **records}
        transition.info["rubric"] = rubric
        info["rubric"] = rubric
        info["env_reward"] = float(env_reward)
        for name, record in records.items():
            info.setdefault(name, record)
            transition.info.setdefault(name, record)
        return obs, total, terminated, truncated, info


def _spec_and_weight(item: Any) -> tuple[Any, float]:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], int | float):
        return item[0], float(item[1])
    return item, 1.0


def build_component(env: gym.Env, reward: Any, benchmark: str) -> RewardComponent:
    """One component from a spec, a library path or ``"default"`` (the benchmark's library)."""
    from rubricgym.trca.wrapper import TRCAConfig

    if isinstance(reward, RewardComponent):
        return reward
    if reward == "default":
        reward = TRCAConfig()
    elif isinstance(reward, str | os.PathLike):
        reward = TRCAConfig(library=os.fspath(reward))
    if isinstance(reward, RewardSpec):
        return reward.component(env, benchmark)
    raise TypeError(
        "a reward is 'none', 'default', a library path, a reward spec (TRCAConfig, JudgeRewardSpec, or any "
        f"object with component(env, benchmark)), a component, or a list of these; got {type(reward).__name__}"
    )


def attach_reward(env: gym.Env, reward: Any, benchmark: str) -> gym.Env:
    """``reward``: None/"none" (engine reward only); "default" (the benchmark's shipped TRCA
    library; an error says so when none ships); a library path; a reward spec or component;
    or a list of those, each optionally as ``(spec, weight)``."""
    if reward is None or reward == "none":
        return env
    if not isinstance(reward, RewardSpec | RewardComponent) and callable(getattr(reward, "wrap", None)):
        return reward.wrap(env, benchmark)  # a spec that builds its own wrapper
    items = list(reward) if isinstance(reward, list | tuple) and not _is_weighted_pair(reward) else [reward]
    components = [(build_component(env, spec, benchmark), w) for spec, w in map(_spec_and_weight, items)]
    return RubricReward(env, components)


def _is_weighted_pair(reward: Any) -> bool:
    return isinstance(reward, tuple) and len(reward) == 2 and isinstance(reward[1], int | float)
