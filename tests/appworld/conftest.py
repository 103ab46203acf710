from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: make helpers importable

import rubricgym  # noqa: F401  (registers the env ids)


@pytest.fixture(scope="module")
def appworld_env():
    """One AppWorld env (one server) shared by a test module: worlds are re-initialized per reset."""
    env = gym.make("AppWorld-Rubric-v0")
    yield env
    env.close()
