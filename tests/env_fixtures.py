"""One ``make_env`` fixture for every benchmark's tests: envs made through ``gym.make`` with
per-folder defaults, all closed after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest


def make_env_fixture(default_id: str, **defaults: Any) -> Callable[[], Iterator[Callable[..., gym.Env]]]:
    """A ``make_env`` fixture whose ``make_env(env_id=default_id, **kwargs)`` fills ``defaults``."""

    @pytest.fixture
    def make_env() -> Iterator[Callable[..., gym.Env]]:
        made: list[gym.Env] = []

        def _make(env_id: str = default_id, **kwargs: Any) -> gym.Env:
            env = gym.make(env_id, **{**defaults, **kwargs})
            made.append(env)
            return env

        yield _make
        for env in made:
            env.close()

    return make_env
