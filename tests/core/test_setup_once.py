"""Set-up builds once: after `make test` has set up this clone, asking make again finds every
set-up step up to date (the venvs, AppWorld's data, the DeepSpeed op, the llama.cpp server)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_second_setup_re_does_no_step():
    question = subprocess.run(["make", "-q", "setup"], cwd=ROOT, capture_output=True, text=True, check=False)
    dry = subprocess.run(["make", "-n", "setup"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert question.returncode == 0, dry.stdout[-2000:]  # 1: some step would run again
    assert "Nothing to be done for 'setup'" in dry.stdout
