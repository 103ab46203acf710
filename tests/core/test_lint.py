"""The project's lint rules (pyproject.toml, [tool.ruff]) hold for the whole tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from requirements_guard import need

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    need("ruff", "pip install 'rubricgym[dev]'")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
