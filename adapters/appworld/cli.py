"""``rubricgym appworld``: set up AppWorld's own venv and offline data, inspect, serve.

    rubricgym appworld setup [--base DIR]   # what `make appworld` does (cached per data version)
    rubricgym appworld status
    rubricgym appworld tasks
    rubricgym appworld serve                # one loopback server until Ctrl-C
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

APPWORLD_VERSION = "0.1.3.post1"
GENERATOR = Path(__file__).with_name("generate.py")  # run by AppWorld's python, not imported
TASKS = Path(__file__).with_name("tasks")  # the committed scenario code the generator reads
VERSION_FILE = ".data-version"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["setup", "status", "tasks", "serve"], metavar="ACTION",
                        help="setup: build AppWorld's venv and generate + check the offline task set; "
                             "status: what is installed and where; tasks: list the offline task ids; "
                             "serve: run one AppWorld server on 127.0.0.1 until Ctrl-C")
    parser.add_argument("--base", default=".", help="folder that gets .venvs/appworld and .venvs/appworld-data")
    parser.add_argument("--python", default=sys.executable, help="interpreter to build AppWorld's venv with")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes that check the task set")
    parser.add_argument("--installer", metavar="SCRIPT",
                        help="make AppWorld's venv and install into it with this script (the repository's "
                             "scripts/fast_install.py: uv, seconds) instead of venv and pip (about half a minute)")


def data_version() -> str:
    """What the generated task set depends on: AppWorld's version and the generator's code
    (the committed scenarios). Equal versions give equal data, so it is generated and
    checked once per version and copied from the cache after that."""
    digest = hashlib.sha256(APPWORLD_VERSION.encode())
    for path in [GENERATOR, *sorted(TASKS.glob("*.py"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    """``$RUBRICGYM_CACHE`` or ``~/.cache/rubricgym`` (kept across clones of the repository)."""
    root = os.environ.get("RUBRICGYM_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "rubricgym"


def _say(text: str) -> None:
    print(f"[appworld setup] {text}", flush=True)


def _install_venv(venv: Path, python: str, installer: str | None) -> None:
    py = venv / "bin" / "python"
    if (venv / ".appworld-installed").exists():
        return
    requirements = [f"appworld=={APPWORLD_VERSION}", "uvicorn"]
    if installer:
        _say(f"AppWorld {APPWORLD_VERSION} into its own venv {venv} ({installer}, then `appworld install`)")
        steps = [[sys.executable, installer, "--python", str(py), "--create-from", python, "-q", *requirements]]
    else:
        _say(f"AppWorld {APPWORLD_VERSION} into its own venv {venv} (pip, then `appworld install`: a few minutes, once)")
        steps = [] if py.exists() else [[python, "-m", "venv", str(venv)]]
        steps += [[str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"],
                  [str(py), "-m", "pip", "install", "-q", *requirements]]
    steps.append([str(venv / "bin" / "appworld"), "install"])
    for cmd in steps:
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    (venv / ".appworld-installed").touch()


def _install_data(venv: Path, data: Path, jobs: int) -> None:
    version = data_version()
    stamp = data / VERSION_FILE
    if stamp.exists() and stamp.read_text().strip() == version:
        _say(f"offline task set {data} is up to date (data version {version})")
        return
    cached = cache_root() / "appworld-data" / version
    if not (cached / VERSION_FILE).exists():
        _say(f"generating the offline task set (data version {version}) and checking every variant with AppWorld's "
             f"evaluator, {jobs} jobs: about 3 minutes on 2 idle cores, once per data version")
        staging = cached.with_name(f"{version}.partial-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        subprocess.run([str(venv / "bin" / "python"), str(GENERATOR), "--root", str(staging), "--jobs", str(jobs)],
                       check=True)
        shutil.rmtree(staging / "experiments", ignore_errors=True)  # run outputs of the check, not data
        (staging / VERSION_FILE).write_text(version + "\n")
        try:
            staging.rename(cached)  # whole or not at all; a concurrent set-up that won leaves its copy
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    else:
        _say(f"offline task set: data version {version} was generated and checked before; copying it from {cached}")
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(cached, data, ignore=shutil.ignore_patterns("__pycache__"))


def _setup(base: Path, python: str, jobs: int, installer: str | None) -> int:
    venv, data = base / ".venvs" / "appworld", base / ".venvs" / "appworld-data"
    start = time.monotonic()
    _install_venv(venv, python, installer)
    _install_data(venv, data, jobs)
    _say(f"done in {time.monotonic() - start:.0f} s: {venv}, {data}")
    return 0


def run(args: argparse.Namespace) -> int:
    from rubricgym.adapters.appworld.paths import AppWorldNotSetUp, appworld_python, offline_data_root  # lazy CLI

    if args.action == "setup":
        return _setup(Path(args.base).resolve(), args.python, args.jobs, args.installer)
    if args.action == "tasks":
        from rubricgym.adapters.appworld.tasks import load_catalog  # lazy CLI

        for task in load_catalog():
            print(f"{task['id']:22s} {task['split']:5s} {','.join(task['apps']):24s} {task['instruction']}")
        return 0
    try:
        python, root = appworld_python(), offline_data_root()
    except AppWorldNotSetUp as exc:
        print(f"not set up: {exc}", file=sys.stderr)
        return 1
    if args.action == "status":
        index = json.loads((root / "rubricgym_index.json").read_text())
        print(json.dumps({"appworld_python": str(python), "data_root": str(root),
                          "appworld_version": index.get("appworld_version"), "tasks": len(index["tasks"]),
                          "scenarios": len({t.get("scenario") for t in index["tasks"]}),
                          "splits": {s: sum(t.get("split") == s for t in index["tasks"]) for s in ("train", "dev")}},
                         indent=1))
        return 0
    from rubricgym.adapters.appworld.engine import AppWorldServer  # lazy CLI

    server = AppWorldServer(root)
    server.start()
    print(f"AppWorld environment server on {server.url} (pid {server.pid}); Ctrl-C stops it", flush=True)
    try:
        while server.alive():
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
