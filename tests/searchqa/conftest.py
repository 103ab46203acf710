"""Shared helpers for the SearchQA tests (bundled set, both grammars)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from requirements_guard import need

need("bm25s", "pip install 'rubricgym[searchqa]'")

import rubricgym  # noqa: E402,F401  (registers the env ids)


@pytest.fixture
def make_env():
    made = []

    def _make(env_id: str = "SearchQA-Rubric-v0", **kwargs):
        env = gym.make(env_id, **kwargs)
        made.append(env)
        return env

    yield _make
    for env in made:
        env.close()
