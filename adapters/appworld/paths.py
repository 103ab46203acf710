"""Where AppWorld's venv and data roots are (set-up lives outside the main venv)."""

from __future__ import annotations

import os
from pathlib import Path

SETUP_HINT = "run `make appworld` (or `rubricgym appworld setup`) from the rubricgym checkout"
OFFICIAL_SPLITS = ("train", "dev", "test_normal", "test_challenge")
# imported by every process of AppWorld's (every AppWorld sandbox binds it, see sandbox.py)
MODEL_CHECKS_SCRIPT = Path(__file__).with_name("model_checks.py")


class AppWorldNotSetUp(RuntimeError):
    """AppWorld's own venv or data root is missing."""


def _candidate_bases() -> list[Path]:
    here = Path(__file__).resolve()
    bases = [Path.cwd()] + [p for p in here.parents if (p / "pyproject.toml").exists()]
    return list(dict.fromkeys(bases))


def appworld_python() -> Path:
    """The python of AppWorld's venv: $RUBRICGYM_APPWORLD_PYTHON or <repo>/.venvs/appworld."""
    env = os.environ.get("RUBRICGYM_APPWORLD_PYTHON")
    if env:
        path = Path(env)
        if not path.exists():
            raise AppWorldNotSetUp(f"RUBRICGYM_APPWORLD_PYTHON={env} does not exist")
        return path
    for base in _candidate_bases():
        path = base / ".venvs" / "appworld" / "bin" / "python"
        if path.exists():
            return path
    raise AppWorldNotSetUp(f"AppWorld's venv (.venvs/appworld) was not found: {SETUP_HINT}")


def offline_data_root() -> Path:
    """The generated offline task set: $RUBRICGYM_APPWORLD_DATA or <repo>/.venvs/appworld-data."""
    env = os.environ.get("RUBRICGYM_APPWORLD_DATA")
    candidates = [Path(env)] if env else [b / ".venvs" / "appworld-data" for b in _candidate_bases()]
    for root in candidates:
        if (root / "rubricgym_index.json").exists():
            return root.resolve()
    raise AppWorldNotSetUp(f"the offline AppWorld task set was not generated ({candidates[0]}): {SETUP_HINT}")


def official_data_root(split: str) -> Path:
    """$APPWORLD_ROOT with AppWorld's official ``data/`` (downloaded by the user)."""
    root = os.environ.get("APPWORLD_ROOT")
    if not root or not (Path(root) / "data" / "datasets" / f"{split}.txt").exists():
        raise AppWorldNotSetUp(
            f"AppWorld split {split!r} needs the official AppWorld data: set APPWORLD_ROOT to a folder "
            f"holding data/datasets/{split}.txt and data/tasks/ (`appworld download data`); it is not "
            "bundled and cannot be downloaded offline. AppWorld-Rubric-v0 uses the offline task set."
        )
    return Path(root).resolve()
