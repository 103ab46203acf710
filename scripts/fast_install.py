"""``pip install`` into a venv through uv, with this machine's pip configuration; pip if uv fails.

    python scripts/fast_install.py --python .venv/bin/python [--quiet] REQUIREMENT... [-e PATH]
    python scripts/fast_install.py --python .venvs/x/bin/python --create-from python3 REQUIREMENT...

Why: on a fresh clone pip spends minutes resolving against the index one package at a time,
unpacking and byte-compiling all of what it installed before. uv resolves in parallel and
links files from its cache.

What it keeps from pip, and what not:

* nothing of pip's byte-compiling at install: uv leaves it, as its own default, to the first
  import, which writes each module's bytecode once (the Makefile un-sets
  ``PYTHONDONTWRITEBYTECODE`` for its commands: it is set on these machines, and would make
  every process compile torch, transformers and peft from source, about 3x their import time).
  Compiling all 33,000 files of the main venv up front took 2-3.7 of set-up's 4.6-7 minutes,
  and the suite imports a fraction of them;
* the indexes, find-links, constraints, certificate and time-out that ``pip config list``
  shows (files and ``PIP_*`` variables), passed to uv as flags, with pip's rule for several
  indexes (the best match across all of them: ``--index-strategy unsafe-best-match``);
* wheels built from source distributions are kept in a wheelhouse
  (``$XDG_CACHE_HOME/rubricgym/wheels``, beside the llama.cpp wheel) and offered to later installs: the package proxy's
  responses defeat uv's cache revalidation, so uv would otherwise rebuild them on every fresh
  clone (minutes for textworld's planner).

* ``--create-from PYTHON`` first makes the venv if it has no interpreter yet: ``uv venv --seed``
  (pip in it, under a second) where ``venv`` and upgrading its pip take about 8 s.

uv is the target venv's, else the one beside the interpreter running this script (make runs it
with the main venv's), else the one on ``PATH``, else installed into the target venv (pinned).
Any failure of uv falls back to ``python -m venv`` and ``python -m pip install`` with the same
arguments, which is slower but the same install.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

UV_VERSION = "0.13.9"
LIST_KEYS = {"find-links": "--find-links", "extra-index-url": "--extra-index-url", "constraint": "--constraint"}
ONE_KEYS = {"index-url": "--index-url"}


def pip_config(python: Path) -> dict[str, str]:
    """What ``pip config list`` of ``python`` shows."""
    out = subprocess.run([str(python), "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    return parse_pip_config(out.stdout)


def parse_pip_config(listing: str) -> dict[str, str]:
    """``pip config list`` output as {key: value}; a variable (``:env:``) wins over a file, as in pip."""
    found: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        match = re.fullmatch(r"(?P<scope>[^.]*)\.(?P<key>[\w-]+)='(?P<value>.*)'", line.strip())
        if match:
            rank = 1 if match["scope"] == ":env:" else 0
            key = match["key"]
            if key not in found or rank >= found[key][0]:
                found[key] = (rank, match["value"])
    return {key: value for key, (_, value) in found.items()}


def uv_flags(config: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(uv pip install flags, environment variables) for pip's configuration."""
    flags = ["--index-strategy", "unsafe-best-match"]
    for key, flag in LIST_KEYS.items():
        for value in config.get(key, "").split():
            flags += [flag, value]
    for key, flag in ONE_KEYS.items():
        if config.get(key):
            flags += [flag, config[key]]
    env: dict[str, str] = {}
    if config.get("cert"):
        env["SSL_CERT_FILE"] = config["cert"]
    if config.get("timeout") or config.get("default-timeout"):
        env["UV_HTTP_TIMEOUT"] = config.get("timeout") or config["default-timeout"]
    return flags, env


def wheelhouse() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rubricgym" / "wheels"


def uv_cache() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("UV_CACHE_DIR") or cache / "uv")


def keep_built_wheels(house: Path) -> list[str]:
    """Copy the wheels uv built from registry source distributions into ``house``; their names."""
    kept = []
    for built in sorted(uv_cache().glob("sdists-v*/pypi/*/*/*/*.whl")):
        target = house / built.name
        if not target.exists():
            house.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, target)
            kept.append(built.name)
    return kept


def find_uv(python: Path) -> Path | None:
    """uv from the target venv, else beside the running interpreter, else from ``PATH``."""
    for uv in (python.parent / "uv", Path(sys.executable).parent / "uv"):
        if uv.exists():
            return uv
    found = shutil.which("uv")
    return Path(found) if found else None


def ensure_uv(python: Path, quiet: bool) -> Path | None:
    """:func:`find_uv`'s uv, else uv installed into the target venv."""
    found = find_uv(python)
    if found is not None:
        return found
    uv = python.parent / "uv"
    got = subprocess.run([str(python), "-m", "pip", "install", *(["-q"] if quiet else []), f"uv=={UV_VERSION}"],
                         check=False)
    return uv if got.returncode == 0 and uv.exists() else None


def index_flags(flags: list[str]) -> list[str]:
    """:func:`uv_flags` less what ``uv venv`` does not take (constraints)."""
    kept: list[str] = []
    for flag, value in zip(flags[::2], flags[1::2]):
        if flag != "--constraint":
            kept += [flag, value]
    return kept


def create_venv(python: Path, base: str, quiet: bool, config: dict[str, str]) -> int:
    """Make the venv whose interpreter ``python`` will be, from the interpreter ``base``, with pip;
    ``config`` is pip's configuration (:func:`pip_config`)."""
    venv = python.parent.parent
    uv = find_uv(python)
    if uv is not None:
        flags, env = uv_flags(config)
        got = subprocess.run([str(uv), "venv", *(["-q"] if quiet else []), "--clear", "--seed", "--python", base,
                              *index_flags(flags), str(venv)], env={**os.environ, **env}, check=False)
        if got.returncode == 0:
            return 0
        print(f"[setup] uv venv exited with {got.returncode}; making the venv with python -m venv", file=sys.stderr)
    made = subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=False)
    if made.returncode != 0:
        return made.returncode
    return subprocess.run([str(python), "-m", "pip", "install", *(["-q"] if quiet else []), "--upgrade", "pip"],
                          check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, required=True, help="the venv's python")
    parser.add_argument("--create-from", metavar="PYTHON", help="make the venv from this interpreter if it is missing")
    parser.add_argument("--quiet", "-q", action="store_true")
    args, requirements = parser.parse_known_args(argv)
    quiet = ["-q"] if args.quiet else []
    config: dict[str, str] | None = None  # read once: each read is a pip process (~0.35 s)
    if args.create_from and not args.python.exists():
        config = pip_config(Path(sys.executable))  # the new venv has no pip to ask yet: the running one's
        made = create_venv(args.python, args.create_from, args.quiet, config)
        if made != 0:
            return made
    if not requirements:
        return 0
    uv = ensure_uv(args.python, args.quiet)
    if uv is not None:
        flags, env = uv_flags(config if config is not None else pip_config(args.python))
        house = wheelhouse()
        if house.is_dir():
            flags += ["--find-links", str(house)]
        got = subprocess.run([str(uv), "pip", "install", "--python", str(args.python), *quiet, *flags,
                              *requirements],
                             env={**os.environ, **env}, check=False)
        if got.returncode == 0:
            kept = keep_built_wheels(house)
            if kept:
                print(f"[setup] kept wheels built from source for later installs in {house}: {', '.join(kept)}")
            return 0
        print(f"[setup] uv exited with {got.returncode}; installing with pip instead", file=sys.stderr)
    else:
        print("[setup] uv is not available; installing with pip", file=sys.stderr)
    return subprocess.run([str(args.python), "-m", "pip", "install", *quiet, *requirements], check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
