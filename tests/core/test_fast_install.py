"""scripts/fast_install.py: pip's configuration reaches uv unchanged, wheels uv built from
source are kept for the next fresh clone, and bytecode is written at first import, not at
set-up."""

from __future__ import annotations

import base64
import ensurepip
import hashlib
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("fast_install", ROOT / "scripts" / "fast_install.py")
fast_install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fast_install)

LISTING = """global.cert='/etc/ssl/certs/ca.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels-from-file'
:env:.find-links='/opt/wheels'
:env:.default-timeout='180'
not a setting line
"""


def test_a_variable_wins_over_a_file_and_every_index_becomes_a_flag():
    config = fast_install.parse_pip_config(LISTING)
    assert config["find-links"] == "/opt/wheels" and config["cert"] == "/etc/ssl/certs/ca.crt"
    flags, env = fast_install.uv_flags(config)
    assert flags == ["--index-strategy", "unsafe-best-match", "--find-links", "/opt/wheels",
                     "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
                     "--constraint", "/etc/xdg/pip/constraints.txt"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca.crt", "UV_HTTP_TIMEOUT": "180"}


def test_no_configuration_gives_pips_default_index_rule_only():
    assert fast_install.uv_flags(fast_install.parse_pip_config("")) == (["--index-strategy", "unsafe-best-match"], {})


def test_wheels_built_from_registry_sources_are_kept_and_editable_builds_are_not(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv"))
    built = tmp_path / "uv" / "sdists-v11" / "pypi" / "jericho" / "3.3.1" / "abc" / "jericho-3.3.1-py3-none-any.whl"
    editable = tmp_path / "uv" / "sdists-v11" / "editable" / "f00" / "xyz" / "rubricgym-0.1.0-0.editable-py3-none-any.whl"
    for path in (built, editable):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"wheel")
    house = tmp_path / "house"
    assert fast_install.keep_built_wheels(house) == ["jericho-3.3.1-py3-none-any.whl"]
    assert sorted(p.name for p in house.iterdir()) == ["jericho-3.3.1-py3-none-any.whl"]
    assert fast_install.keep_built_wheels(house) == []  # already kept: nothing copied again


def a_wheel(folder: Path) -> Path:
    """A one-module pure-Python wheel, written by hand (no build backend, no index)."""
    files = {"probe_mod.py": b"VALUE = 42\n",
             "probe_mod-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: probe-mod\nVersion: 1.0\n",
             "probe_mod-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for name, data in files.items()) + "probe_mod-1.0.dist-info/RECORD,,\n"
    wheel = folder / "probe_mod-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in {**files, "probe_mod-1.0.dist-info/RECORD": record.encode()}.items():
            z.writestr(name, data)
    return wheel


def test_uv_installs_without_compiling_and_the_first_import_writes_the_bytecode(tmp_path, monkeypatch):
    """Set-up leaves compiling to the first import (uv's default), which writes each module's
    bytecode once: where PYTHONDONTWRITEBYTECODE is set, as on these machines, make un-sets
    it (see the next test), else every process would compile its imports again."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    uv = fast_install.ensure_uv(Path(sys.executable), quiet=True)  # the main venv's (make installed it)
    assert uv is not None
    monkeypatch.setenv("PATH", f"{uv.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no wheelhouse of this machine's
    assert fast_install.main(["--python", str(python), "--quiet", str(a_wheel(tmp_path))]) == 0
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    assert (site / "probe_mod.py").exists() and not list(site.glob("__pycache__/probe_mod.*.pyc"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([str(python), "-c", "import probe_mod"], env=env, check=True)
    assert len(list(site.glob("__pycache__/probe_mod.*.pyc"))) == 1


def test_every_command_make_runs_writes_bytecode():
    """The Makefile un-sets PYTHONDONTWRITEBYTECODE for its recipes (and so for the suite and
    every process it starts), whatever the caller's environment says."""
    probe = 'probe: ; @python3 -c "import sys; print(sys.dont_write_bytecode)"'
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    with_var = subprocess.run(["python3", "-c", "import sys; print(sys.dont_write_bytecode)"], env=env,
                              capture_output=True, text=True, check=True)
    assert with_var.stdout.strip() == "True"  # the variable alone stops the writing
    made = subprocess.run(["make", "-s", "--no-print-directory", "--eval", probe, "probe"], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert made.stdout.strip() == "False"


def pip_of(python: Path) -> str:
    return subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True, check=True).stdout


def test_create_from_makes_a_venv_with_pip_through_uv_once(tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    assert fast_install.main(["--python", str(python), "--create-from", sys.executable, "--quiet"]) == 0
    assert python.exists() and (tmp_path / "venv" / "pyvenv.cfg").read_text().count("uv =") == 1
    assert pip_of(python).startswith("pip ")
    (tmp_path / "venv" / "marker").write_text("kept")  # a venv that has its interpreter is left as it is
    assert fast_install.main(["--python", str(python), "--create-from", sys.executable, "--quiet"]) == 0
    assert (tmp_path / "venv" / "marker").read_text() == "kept"


def test_create_from_without_uv_falls_back_to_venv_and_a_current_pip(tmp_path, monkeypatch):
    monkeypatch.setattr(fast_install, "find_uv", lambda python: None)
    python = tmp_path / "venv" / "bin" / "python"
    assert fast_install.main(["--python", str(python), "--create-from", sys.executable, "--quiet"]) == 0
    assert "uv =" not in (tmp_path / "venv" / "pyvenv.cfg").read_text()
    installed = tuple(int(part) for part in pip_of(python).split()[1].split(".")[:2])
    bundled = tuple(int(part) for part in ensurepip.version().split(".")[:2])
    assert installed >= bundled  # venv's own pip, then upgraded
