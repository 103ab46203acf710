"""The OS boundary around agent code: AppWorld's code shell runs inside bubblewrap (``bwrap``).

Python-level guards cannot hold code that may call ``io.FileIO``, ``ctypes`` or
``os.posix_spawn``; namespaces can. Three processes, each in a sandbox of its own:

* the code shell (``serve_app.py``, where the agent's code runs): its own PID namespace (no
  other process is visible, every process it starts dies with it, ``--die-with-parent``), its
  own network namespace (only its own loopback), an empty environment (a minimal
  ``PATH``/``HOME``/``LANG`` set back), no ``/etc`` beyond the dynamic linker's cache, a
  private ``/tmp``; read-only views of ``/usr``, AppWorld's venv, its interpreter and the data
  root with every task's ``ground_truth`` folder masked by an empty one; writes only to the
  episode outputs folder of this env (``experiments/outputs/<experiment>``) and ``/tmp``.
  Its channels: a Unix socket rubricgym talks to it over, and the apps' socket (below);
* the apps (``serve_apps.py``): AppWorld's apps and the world's databases, which the agent's
  code reaches only as HTTP requests over the apps' socket (the app APIs, nothing else). It
  runs no agent code, sees the data root without ground truth and writes nowhere but its
  sockets' folders and ``/tmp``;
* the evaluator (``evaluate_app.py``): the data root read-only, ground truth included, the
  apps' control socket (not the shell's to reach) to read the end state from, a private
  in-memory ``experiments/outputs`` to lay it out for AppWorld's ``evaluate_task``, no
  network, no agent code.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rubricgym.adapters.appworld.paths import MODEL_CHECKS_SCRIPT

BWRAP_ENV = "RUBRICGYM_BWRAP"  # the bwrap binary to use (default: bwrap on PATH)
INSTALL_HINT = ("install bubblewrap (`make appworld-sandbox`, i.e. `apt-get install bubblewrap` on Debian) on a "
                "machine that allows unprivileged user namespaces, or opt out explicitly with sandbox=False "
                "(agent code then runs with the server's own rights: only AppWorld's Python-level guards hold it)")
SANDBOX_PATH = "/usr/bin:/bin"


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create the namespaces on this machine."""


def bwrap_binary() -> str:
    """The bwrap to use: ``$RUBRICGYM_BWRAP`` or ``bwrap`` on PATH."""
    configured = os.environ.get(BWRAP_ENV)
    found = configured or shutil.which("bwrap")
    if not found or not os.access(found, os.X_OK):
        raise SandboxUnavailable(f"AppWorld's sandbox needs bubblewrap, and {configured or 'bwrap'} was not found: "
                                 + INSTALL_HINT)
    return found


@functools.cache
def _probe(bwrap: str) -> str | None:
    """None when ``bwrap`` can set up every namespace the sandbox uses, else why not."""
    try:
        done = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                               "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
                               "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
                               "--", "/usr/bin/true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip()[-500:] or f"exit code {done.returncode}"
    return None


def check_sandbox() -> str:
    """The bwrap binary, once it proved it can build the sandbox here; else ``SandboxUnavailable``."""
    bwrap = bwrap_binary()
    problem = _probe(bwrap)
    if problem is not None:
        raise SandboxUnavailable(f"bubblewrap ({bwrap}) cannot create the sandbox's namespaces here ({problem}): "
                                 + INSTALL_HINT)
    return bwrap


def interpreter_roots(python: Path) -> list[Path]:
    """What the venv's python needs to run: the venv itself and the interpreter it links to."""
    venv = python.parent.parent
    roots = [venv]
    target = python.resolve()
    base = target.parent.parent  # <prefix>/bin/python3 -> <prefix>
    if not target.is_relative_to(venv) and not base.is_relative_to(Path("/usr")):
        roots.append(base)
    return roots


@dataclass
class Sandbox:
    """One bwrap invocation: what is visible read-only, masked, writable, and the environment."""

    bwrap: str
    read_only: list[Path] = field(default_factory=list)
    masked: list[Path] = field(default_factory=list)  # directories shown empty
    writable: list[Path] = field(default_factory=list)
    scratch: list[Path] = field(default_factory=list)  # directories shown empty and writable, in memory
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None

    def command(self, argv: Sequence[str]) -> list[str]:
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        if Path("/etc/ld.so.cache").exists():
            args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        for path in self.read_only:
            args += ["--ro-bind", str(path), str(path)]
        for path in self.masked:
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        for path in self.scratch:
            args += ["--tmpfs", str(path)]
        args += ["--remount-ro", "/"]  # the skeleton bwrap built (mount points' parents) is read-only too
        for name, value in {"PATH": SANDBOX_PATH, "HOME": "/tmp", "LANG": "C.UTF-8", **self.env}.items():
            args += ["--setenv", name, value]
        if self.cwd is not None:
            args += ["--chdir", str(self.cwd)]
        return [*args, "--", *argv]


def ground_truth_folders(data_root: Path) -> list[Path]:
    """Every task's ``ground_truth`` folder under the data root (what agent code must not read)."""
    tasks = data_root / "data" / "tasks"
    return sorted(p for p in tasks.glob("*/ground_truth") if p.is_dir()) if tasks.is_dir() else []


def _appworld_sandbox(bwrap: str, python: Path, scripts: Sequence[Path], data_root: Path, **parts) -> Sandbox:
    """Every AppWorld sandbox also binds ``model_checks.py``, which each of its scripts imports first."""
    read_only = [*interpreter_roots(python), *scripts, MODEL_CHECKS_SCRIPT, data_root, *parts.pop("read_only", [])]
    return Sandbox(bwrap=bwrap, read_only=read_only,
                   env={"APPWORLD_ROOT": str(data_root), "PYTHONUNBUFFERED": "1"}, cwd=data_root, **parts)


def server_sandbox(bwrap: str, python: Path, scripts: Sequence[Path], data_root: Path, outputs: Path,
                   socket_dir: Path, apps_socket_dir: Path | None = None) -> Sandbox:
    """The code shell's sandbox: data root without ground truth; writes to ``outputs`` only;
    the apps' socket folder read-only (a socket there still connects)."""
    return _appworld_sandbox(bwrap, python, scripts, data_root, masked=ground_truth_folders(data_root),
                             writable=[outputs, socket_dir],
                             read_only=[apps_socket_dir] if apps_socket_dir is not None else [])


def apps_sandbox(bwrap: str, python: Path, scripts: Sequence[Path], data_root: Path,
                 socket_dirs: Sequence[Path]) -> Sandbox:
    """The apps' sandbox: data root without ground truth; writes to its sockets' folders only."""
    return _appworld_sandbox(bwrap, python, scripts, data_root, masked=ground_truth_folders(data_root),
                             writable=list(socket_dirs))


def evaluator_sandbox(bwrap: str, python: Path, scripts: Sequence[Path], data_root: Path,
                      control_socket_dir: Path) -> Sandbox:
    """The evaluator's sandbox: the whole data root read-only (ground truth included), the apps'
    control socket folder read-only, ``experiments/outputs`` an empty in-memory folder (where
    AppWorld's evaluation reads the end state's model hashes), no network."""
    return _appworld_sandbox(bwrap, python, scripts, data_root, read_only=[control_socket_dir],
                             scratch=[data_root / "experiments" / "outputs"])
