from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # --import-mode=importlib: make helpers importable

from report_helpers import alfworld_group  # noqa: E402


@pytest.fixture(scope="session")
def alfworld_trajectories():
    """A group of three real ALFWorld rollouts of one game (expert plan, a detour whose
    response carries <script> and HTML, a failing one), with stored advantages."""
    return alfworld_group()


@pytest.fixture(scope="module")
def browser():
    from report_browser import chromium

    with chromium() as driver:
        yield driver
