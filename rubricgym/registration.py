"""Environment ids, and the factory behind ``gym.make("<Benchmark>-Rubric-v0")``.

Each benchmark is described by a ``BenchmarkSpec``; its adapter module is imported only
when an env is made, so a missing optional dependency fails with the extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from rubricgym.env import RubricEnv


class BenchmarkNotInstalled(ImportError):
    """An env id was made whose benchmark's optional dependencies are missing."""


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    adapter: str  # "module:Class"
    extra: str
    requires: tuple[str, ...]
    env_ids: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> adapter kwargs
    max_steps: int = 50


BENCHMARKS: dict[str, BenchmarkSpec] = {}


def register_benchmark(spec: BenchmarkSpec) -> None:
    BENCHMARKS[spec.name] = spec
    for env_id, kwargs in spec.env_ids.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point="rubricgym.registration:make_rubric_env",
            kwargs={"benchmark": spec.name, **kwargs},
            max_episode_steps=None,
            disable_env_checker=False,
        )


def _check_installed(spec: BenchmarkSpec) -> None:
    missing = [m for m in spec.requires if importlib.util.find_spec(m) is None]
    if missing:
        raise BenchmarkNotInstalled(
            f"{spec.name} needs {', '.join(missing)}: install it with "
            f"`pip install 'rubricgym[{spec.extra}]'`"
            + (f" ({spec.name} setup: see README)" if spec.extra == "appworld" else "")
        )


def load_adapter_class(benchmark: str) -> type:
    spec = BENCHMARKS[benchmark]
    _check_installed(spec)
    module, _, cls = spec.adapter.partition(":")
    return getattr(importlib.import_module(module), cls)


def make_rubric_env(
    benchmark: str,
    reward: Any = "default",
    max_steps: int | None = None,
    render_mode: str | None = None,
    **adapter_kwargs: Any,
) -> gym.Env:
    """Build ``RubricEnv`` for a benchmark and attach its reward (see ``attach_reward``)."""
    spec = BENCHMARKS[benchmark]
    adapter = load_adapter_class(benchmark)(**adapter_kwargs)
    env: gym.Env = RubricEnv(adapter, max_steps=max_steps or spec.max_steps, render_mode=render_mode)
    from rubricgym.rewards import attach_reward

    return attach_reward(env, reward, benchmark)


register_benchmark(
    BenchmarkSpec(
        name="ALFWorld",
        adapter="rubricgym.adapters.alfworld:ALFWorldAdapter",
        extra="alfworld",
        requires=("alfworld", "textworld"),
        env_ids={
            "ALFWorld-Rubric-v0": {"split": "train"},
            "ALFWorld-Rubric-Eval-v0": {"split": "eval"},
        },
        max_steps=25,
    )
)

register_benchmark(
    BenchmarkSpec(
        name="AppWorld",
        adapter="rubricgym.adapters.appworld:AppWorldAdapter",
        extra="appworld",
        requires=("httpx",),
        env_ids={
            "AppWorld-Rubric-v0": {"split": "default"},
            "AppWorld-Rubric-Train-v0": {"split": "train"},
            "AppWorld-Rubric-Dev-v0": {"split": "dev"},
            "AppWorld-Rubric-TestNormal-v0": {"split": "test_normal"},
            "AppWorld-Rubric-TestChallenge-v0": {"split": "test_challenge"},
        },
        max_steps=30,
    )
)
