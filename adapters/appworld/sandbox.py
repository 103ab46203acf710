"""The OS boundary around agent code: AppWorld's code shell runs inside bubblewrap (``bwrap``).

Python-level guards cannot hold code that may call ``io.FileIO``, ``ctypes`` or
``os.posix_spawn``; namespaces can. Three processes, each in a sandbox of its own:

* the code shell (``serve_app.py``, where the agent's code runs): its own PID namespace (no
  other process is visible, every process it starts dies with it, ``--die-with-parent``), its
  own network namespace (only its own loopback), an empty environment (bubblewrap itself, the
  sandbox's PID 1, is started with none; the server gets an explicit ``PATH``/``HOME``/``LANG``),
  no ``/etc`` beyond the dynamic linker's cache, a private ``/tmp`` of a fixed size (``--size``:
  the memory cap); read-only views of ``/usr``, AppWorld's venv and its interpreter, and of the
  data root only the current task's folder without its ground truth and databases (a folder
  the env fills at each reset, ``task_view``: no other task's files); writes only to the
  episode outputs folder of this env (``experiments/outputs/<experiment>``) and ``/tmp``
  (``/dev`` is read-only: a tmpfs of half the RAM otherwise). A seccomp filter refuses the two
  ways to hold memory that neither a process's resident set nor ``/tmp`` shows, ``memfd_create``
  and System V ``shmget`` (``EPERM``; ``seccomp_filter``).
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
import platform
import shutil
import struct
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
SHELL_SHARED_DATA = ("data/api_docs",)  # what of the data root, beyond the current task, the code shell reads


# seccomp (linux/seccomp.h, linux/filter.h, linux/audit.h): a classic BPF program over seccomp_data
# (nr at offset 0, arch at 4); per machine, its audit arch and the syscalls refused
SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, {"memfd_create": 319, "memfd_secret": 447, "shmget": 29}),
    "aarch64": (0xC00000B7, {"memfd_create": 279, "memfd_secret": 447, "shmget": 194}),
}
SECCOMP_FD = 9  # the descriptor bwrap reads the program from
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: the same arch, other numbers (all refused)
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO, _EPERM = 0x7FFF0000, 0x00050000, 1


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
                               "--size", str(1024**2), "--tmpfs", "/tmp",  # a sized /tmp: bwrap 0.7 or later
                               "--", "/usr/bin/true"], capture_output=True, timeout=30, env={})
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


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The code shell's seccomp program (bubblewrap's ``--seccomp``): ``memfd_create``,
    ``memfd_secret`` and ``shmget`` fail with ``EPERM``, as does every syscall of another ABI
    (i386 or x32 code would reach them by other numbers); the rest is allowed. Why these: memory
    they hold is in no process's resident set and in no mounted file system, so the sandbox's
    memory census could not see it (and ``/dev/shm``, the other such place, is read-only). None
    on a machine without a table here (then no filter; the census still sees the rest)."""
    known = SECCOMP_ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, numbers = known
    deny = _SECCOMP_RET_ERRNO | _EPERM
    refused = sorted(numbers.values())
    # 0: load arch; 1: native? else deny; 2: load nr; 3: x32? deny; 4..: each refused nr; then allow, deny
    n = len(refused)
    program = [(_BPF_LD_W_ABS, 0, 0, 4), (_BPF_JEQ_K, 1, 0, arch), (_BPF_RET_K, 0, 0, deny),
               (_BPF_LD_W_ABS, 0, 0, 0), (_BPF_JGE_K, n + 1, 0, X32_SYSCALL_BIT)]
    program += [(_BPF_JEQ_K, n - i, 0, nr) for i, nr in enumerate(refused)]  # to the deny after the allow
    program += [(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW), (_BPF_RET_K, 0, 0, deny)]
    return b"".join(struct.pack("=HBBI", *op) for op in program)


def write_seccomp_filter(path: Path) -> Path | None:
    """``seccomp_filter()`` written to ``path`` (bubblewrap reads it at start), or None."""
    program = seccomp_filter()
    if program is None:
        return None
    path.write_bytes(program)
    return path


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
    views: dict[Path, Path] = field(default_factory=dict)  # host folder -> where it is shown, read-only
    tmp_bytes: int | None = None  # the size of the private /tmp (None: the kernel's default, half the RAM)
    seccomp: Path | None = None  # a file holding a seccomp program for the sandboxed process (``seccomp_filter``)

    def command(self, argv: Sequence[str]) -> list[str]:
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
                "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]  # /dev (and /dev/shm): a tmpfs
        if self.tmp_bytes:
            args += ["--size", str(int(self.tmp_bytes))]
        args += ["--tmpfs", "/tmp"]
        if Path("/etc/ld.so.cache").exists():
            args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        for path in self.read_only:
            args += ["--ro-bind", str(path), str(path)]
        for source, shown in self.views.items():
            args += ["--ro-bind", str(source), str(shown)]
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
        if self.seccomp is None:
            return [*args, "--", *argv]
        # bwrap reads the program from a file descriptor: the shell opens it, then becomes bwrap (same
        # PID), leaving bwrap's environment as empty as it found it (the shell sets PWD)
        fd = str(SECCOMP_FD)
        return ["/bin/sh", "-c", f'f=$1; shift; unset PWD; exec "$@" {fd}<"$f"', "sh", str(self.seccomp),
                *args, "--seccomp", fd, "--", *argv]


def ground_truth_folders(data_root: Path) -> list[Path]:
    """Every task's ``ground_truth`` folder under the data root (what agent code must not read)."""
    tasks = data_root / "data" / "tasks"
    return sorted(p for p in tasks.glob("*/ground_truth") if p.is_dir()) if tasks.is_dir() else []


def _appworld_sandbox(bwrap: str, python: Path, scripts: Sequence[Path], data_root: Path, **parts) -> Sandbox:
    """Every AppWorld sandbox also binds ``model_checks.py``, which each of its scripts imports first;
    the data root whole unless ``whole_root=False``."""
    whole_root = parts.pop("whole_root", True)
    read_only = [*interpreter_roots(python), *scripts, MODEL_CHECKS_SCRIPT, *([data_root] if whole_root else []),
                 *parts.pop("read_only", [])]
    return Sandbox(bwrap=bwrap, read_only=read_only,
                   env={"APPWORLD_ROOT": str(data_root), "PYTHONUNBUFFERED": "1"}, cwd=data_root, **parts)


def server_sandbox(bwrap: str, python: Path, scripts: Sequence[Path], data_root: Path, outputs: Path,
                   socket_dir: Path, apps_socket_dir: Path | None = None, task_view: Path | None = None,
                   tmp_bytes: int | None = None, seccomp: Path | None = None) -> Sandbox:
    """The code shell's sandbox: of the data root only the API docs and ``task_view`` (shown read-only as
    ``data/tasks``: the env puts the current task's folder there, without ground truth or
    databases) and ``outputs`` (writable); the apps' socket folder read-only (a socket there
    still connects); a ``/tmp`` of ``tmp_bytes``; the ``seccomp`` program. Without ``task_view``,
    the data root with every task's ground truth masked."""
    sockets = [apps_socket_dir] if apps_socket_dir is not None else []
    if task_view is None:
        return _appworld_sandbox(bwrap, python, scripts, data_root, masked=ground_truth_folders(data_root),
                                 writable=[outputs, socket_dir], read_only=sockets, tmp_bytes=tmp_bytes,
                                 seccomp=seccomp)
    shared = [data_root / part for part in SHELL_SHARED_DATA if (data_root / part).exists()]
    return _appworld_sandbox(bwrap, python, scripts, data_root, whole_root=False, writable=[outputs, socket_dir],
                             read_only=[*shared, *sockets], views={task_view: data_root / "data" / "tasks"},
                             tmp_bytes=tmp_bytes, seccomp=seccomp)


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
