"""Composable, observable rewards: any number of components on one env, each score visible.

A *reward component* scores each transition (a TRCA operator library, an LLM judge, your
own). ``RubricReward`` sums the weighted component rewards, adds the engine's own reward
when asked, and records every component under ``info["rubric"][<name>]`` — the same record
is stored in the transition (``transition.info["rubric"]``), so trajectories and the
trainer's step samples keep every part. Every record has one shape::

    {"reward": float, "weight": float, ...the component's parts...}

A *reward spec* is a config object that builds a component for an env (``TRCAConfig``,
``JudgeRewardSpec``) from the ``RewardContext`` of the env's benchmark (its models, its
shipped operator library and judge rubric); ``gym.make(id, reward=...)`` takes one spec, a
list of them (weights with ``(spec, weight)`` pairs), a library path, ``"default"`` or
``"none"`` (``rubricgym.attach``). The records are read back through ``rubricgym.records``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, SupportsFloat, runtime_checkable

import gymnasium as gym

from rubricgym.adapter import TaskBinding
from rubricgym.contract import Facts, Transition

__all__ = ["ComponentScore", "RewardComponent", "RewardContext", "RewardSpec", "RubricReward"]


@dataclass(frozen=True)
class RewardContext:
    """What a reward spec may know about the env it scores: the benchmark's name, models and
    shipped files (from its ``BenchmarkSpec``, passed down when the env is made)."""

    benchmark: str
    facts_model: type[Facts] | None = None
    binding_model: type[TaskBinding] | None = None
    operator_library: Path | None = None
    judge_rubric: Path | None = None


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

    def component(self, env: gym.Env, context: RewardContext) -> RewardComponent: ...


class RubricReward(gym.Wrapper[str, str, str, str]):
    """Step reward = sum_c weight_c * reward_c (+ the engine reward when kept).

    ``keep_env_reward=None`` keeps the engine reward when any component keeps it (it is
    added once). ``info["env_reward"]`` always holds the engine's own reward;
    ``info["rubric"]`` the component records; ``info[<name>]`` aliases each record (so
    ``info["trca"]`` keeps working). Compose by listing components here, not by stacking
    ``RubricReward`` wrappers.

    >>> import gymnasium as gym
    >>> class Brevity:  # any object with name, keep_env_reward, reset and score is a component
    ...     name, keep_env_reward = "brevity", False
    ...     def reset(self, info): pass
    ...     def score(self, transition, info):
    ...         return ComponentScore(-len(transition.response) / 1000, {"chars": len(transition.response)})
    >>> env = gym.make("ALFWorld-Rubric-v0", reward=["default", (Brevity(), 0.5)])
    >>> _ = env.reset(seed=0)
    >>> _, reward, _, _, info = env.step("<think>x</think><action>look</action>")
    >>> sorted(info["rubric"]), info["rubric"]["brevity"]
    (['brevity', 'trca'], {'reward': -0.037, 'weight': 0.5, 'chars': 37})
    >>> round(reward - info["rubric"]["trca"]["reward"] - info["env_reward"], 4)
    -0.0185
    >>> env.close()
    """

    def __init__(self, env: gym.Env[str, str], components: Sequence[tuple[RewardComponent, float]],
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

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        for comp, _ in self.components:
            comp.reset(info)
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
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
