"""One rule for optional dependencies in tests: skip locally, fail under CI.

``need("alfworld")`` returns the imported module. When it cannot be imported the test is
skipped on a developer machine (with the extra to install) but *fails* when ``CI=true``,
so a missing install step can never turn a suite green by skipping it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(module: str, hint: str = "") -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is not importable ({exc}){': ' + hint if hint else ''}"
        if in_ci():
            pytest.fail(f"CI=true and a test dependency is missing: {message}", pytrace=False)
        pytest.skip(message, allow_module_level=True)
        raise  # unreachable: skip raises


def need_path(path: os.PathLike[str] | str, hint: str = "") -> None:
    """The same rule for a file or folder that set-up builds (a venv, a generated data set)."""
    if not os.path.exists(path):
        message = f"{path} does not exist{': ' + hint if hint else ''}"
        if in_ci():
            pytest.fail(f"CI=true and a set-up artefact is missing: {message}", pytrace=False)
        pytest.skip(message, allow_module_level=True)
