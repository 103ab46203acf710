"""Set-up installs DeepSpeed with its CPU shared-memory op compiled in (mk/deepspeed.mk), so no
ZeRO run, in this clone or the next, compiles it through torch's extension loader."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from requirements_guard import need

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_deepspeed_ops.py"


def test_deepspeed_loads_its_shm_op_from_its_own_package_without_compiling(tmp_path):
    need("deepspeed", "pip install 'rubricgym[train]'")
    extensions = tmp_path / "torch_extensions"  # where torch's loader would compile it
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(extensions)}
    done = subprocess.run([sys.executable, str(SCRIPT)], env=env, cwd=ROOT, capture_output=True, text=True, check=False,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "deepspeed_shm_comm" in done.stdout and "compiled in" in done.stdout
    assert not extensions.exists()


def test_a_deepspeed_without_the_op_compiled_in_is_named_with_the_fix(monkeypatch, capsys):
    need("deepspeed", "pip install 'rubricgym[train]'")
    import deepspeed.git_version_info as installed

    spec = importlib.util.spec_from_file_location("check_deepspeed_ops", SCRIPT)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    monkeypatch.setattr(installed, "installed_ops", {**installed.installed_ops, "deepspeed_shm_comm": False})
    assert check.main() == 1
    assert "no deepspeed_shm_comm op compiled in" in capsys.readouterr().err
