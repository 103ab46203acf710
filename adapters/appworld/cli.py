"""``rubricgym appworld``: set up AppWorld's own venv and offline data, inspect, serve.

    rubricgym appworld setup [--base DIR]   # what `make appworld` does
    rubricgym appworld status
    rubricgym appworld tasks
    rubricgym appworld serve                # one loopback server until Ctrl-C
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

APPWORLD_VERSION = "0.1.3.post1"
GENERATOR = Path(__file__).with_name("generate.py")  # run by AppWorld's python, not imported


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["setup", "status", "tasks", "serve"], metavar="ACTION",
                        help="setup: build AppWorld's venv and generate + check the offline task set; "
                             "status: what is installed and where; tasks: list the offline task ids; "
                             "serve: run one AppWorld server on 127.0.0.1 until Ctrl-C")
    parser.add_argument("--base", default=".", help="folder that gets .venvs/appworld and .venvs/appworld-data")
    parser.add_argument("--python", default=sys.executable, help="interpreter to build AppWorld's venv with")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes that check the task set")


def _setup(base: Path, python: str, jobs: int) -> int:
    venv, data = base / ".venvs" / "appworld", base / ".venvs" / "appworld-data"
    py = venv / "bin" / "python"
    steps: list[list[str]] = []
    if not (venv / ".appworld-installed").exists():
        if not py.exists():
            steps.append([python, "-m", "venv", str(venv)])
        steps += [[str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"],
                  [str(py), "-m", "pip", "install", "-q", f"appworld=={APPWORLD_VERSION}", "uvicorn"],
                  [str(venv / "bin" / "appworld"), "install"]]
    start = time.monotonic()
    for cmd in steps:
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    if steps:
        (venv / ".appworld-installed").touch()
    subprocess.run([str(py), str(GENERATOR), "--root", str(data), "--jobs", str(jobs)], check=True)
    (data / ".generated").touch()
    print(f"AppWorld set up in {time.monotonic() - start:.0f} s: {venv}, {data}")
    return 0


def run(args: argparse.Namespace) -> int:
    from rubricgym.adapters.appworld.paths import AppWorldNotSetUp, appworld_python, offline_data_root  # lazy CLI

    if args.action == "setup":
        return _setup(Path(args.base).resolve(), args.python, args.jobs)
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
