"""Shared helpers for the ALFWorld tests (bundled games only, whatever $ALFWORLD_DATA says)."""

from __future__ import annotations

import pytest
from env_fixtures import make_env_fixture
from requirements_guard import need

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT


@pytest.fixture(autouse=True)
def _alfworld_installed():
    """Per test, never per folder: locally each test skips with the extra to install; under
    CI=true each one fails, so the folder can never vanish as one green skip."""
    need("textworld", "pip install 'rubricgym[alfworld]'")
    need("alfworld", "pip install 'rubricgym[alfworld]'")


make_env = make_env_fixture("ALFWorld-Rubric-v0", reward="none", data_path=BUNDLED_ROOT)


def wrap_action(command: str) -> str:
    """An agent response in the default protocol."""
    return f"<think>next step</think><action>{command}</action>"


@pytest.fixture
def wrap():
    return wrap_action
