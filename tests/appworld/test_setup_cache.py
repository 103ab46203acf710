"""The offline task set is generated and checked once per data version: a second set-up with
the same generator code does nothing, and a fresh checkout copies the checked set from the
cache instead of running AppWorld's evaluator over 306 variants again."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rubricgym.adapters.appworld import cli


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_data_version_follows_the_generator_code(tmp_path, monkeypatch):
    tasks = tmp_path / "tasks"
    shutil.copytree(cli.TASKS, tasks, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cli, "TASKS", tasks)
    before = cli.data_version()
    assert before == cli.data_version()  # a pure function of the files
    (tasks / "scenarios.py").write_text((tasks / "scenarios.py").read_text() + "\n# changed\n")
    assert cli.data_version() != before
    monkeypatch.setattr(cli, "APPWORLD_VERSION", "0.0.0")
    assert len({before, cli.data_version()}) == 2


def test_an_up_to_date_set_is_left_alone_and_a_cached_one_is_copied(tmp_path, cache, monkeypatch):
    runs: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: runs.append(cmd))  # the generator must not run
    version = cli.data_version()
    cached = cache / "appworld-data" / version
    (cached / "data").mkdir(parents=True)
    (cached / "data" / "task.json").write_text("{}")
    (cached / cli.VERSION_FILE).write_text(version + "\n")

    data = tmp_path / "checkout" / ".venvs" / "appworld-data"
    cli._install_data(tmp_path / "venv", data, jobs=2)
    assert (data / "data" / "task.json").read_text() == "{}" and (data / cli.VERSION_FILE).exists()
    (data / "marker").write_text("kept")
    cli._install_data(tmp_path / "venv", data, jobs=2)  # up to date: nothing copied over it
    assert (data / "marker").read_text() == "kept" and runs == []


def test_a_new_version_is_generated_once_into_the_cache(tmp_path, cache, monkeypatch):
    runs: list[list[str]] = []

    def generate(cmd: list[str], **kw: object) -> None:
        runs.append(cmd)
        root = Path(cmd[cmd.index("--root") + 1])
        (root / "data").mkdir(parents=True)
        (root / "experiments" / "outputs").mkdir(parents=True)  # the check's run outputs: not kept

    monkeypatch.setattr(subprocess, "run", generate)
    first, second = tmp_path / "a" / "appworld-data", tmp_path / "b" / "appworld-data"
    cli._install_data(tmp_path / "venv", first, jobs=2)
    cli._install_data(tmp_path / "venv", second, jobs=2)
    assert len(runs) == 1  # the second checkout copied the cached set
    assert (second / "data").is_dir() and not (second / "experiments").exists()
    assert (cache / "appworld-data" / cli.data_version() / cli.VERSION_FILE).exists()


@pytest.mark.parametrize("installer", [None, "scripts/fast_install.py"])
def test_the_venv_is_made_by_the_installer_given_else_by_venv_and_pip(tmp_path, monkeypatch, installer):
    runs: list[list[str]] = []
    venv, py = tmp_path / "appworld", str(tmp_path / "appworld" / "bin" / "python")

    def record(cmd: list[str], **kw: object) -> None:
        runs.append(cmd)
        venv.mkdir(exist_ok=True)  # what the first step would have made

    monkeypatch.setattr(subprocess, "run", record)
    cli._install_venv(venv, "python3", installer)
    requirements = [f"appworld=={cli.APPWORLD_VERSION}", "uvicorn"]
    if installer:  # one call makes the venv (if missing) and installs: uv through the repository's script
        assert runs[:-1] == [[cli.sys.executable, installer, "--python", py, "--create-from", "python3", "-q",
                              *requirements]]
    else:
        assert runs[:-1] == [["python3", "-m", "venv", str(venv)],
                             [py, "-m", "pip", "install", "-q", "--upgrade", "pip"],
                             [py, "-m", "pip", "install", "-q", *requirements]]
    assert runs[-1] == [str(venv / "bin" / "appworld"), "install"]
    assert (venv / ".appworld-installed").exists()
    runs.clear()
    cli._install_venv(venv, "python3", installer)  # installed: nothing runs again
    assert runs == []
