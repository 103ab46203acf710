"""Under CI=true every property test is derandomized (issue 54, item 8): the profile tests load
says so, checked in a fresh interpreter the way CI starts pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _profile(ci: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
    if ci is not None:
        env["CI"] = ci
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import conftest; from hypothesis import settings; "
            "print(settings.default.derandomize)")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=True, cwd=TESTS)
    return done.stdout.strip().splitlines()[-1]


def test_ci_runs_are_derandomized_and_local_runs_search():
    assert _profile("true") == "True"
    assert _profile(None) == "False"
