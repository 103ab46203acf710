"""The README's example runs as written and wins its game."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.slow
def test_readme_example_runs():
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert "'parse_error'" not in lines[1] and "nothing_happens" in lines[2]
    assert "'episode_done': True" in lines[-1]
