"""Shared helpers for the SearchQA tests (bundled set, both grammars)."""

from __future__ import annotations

from env_fixtures import make_env_fixture
from requirements_guard import need

need("bm25s", "pip install 'rubricgym[searchqa]'")

import rubricgym  # noqa: E402,F401  (registers the env ids)


make_env = make_env_fixture("SearchQA-Rubric-v0")
