"""Helpers for the ``rubricgym eval`` tests: the scripted OpenAI-compatible server of the judge
tests, and agents importable as ``module:function``."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # eval_agents (the callable policy)
sys.path.insert(0, str(HERE.parent / "judges"))  # judge_test_servers
