"""Subprocess servers on loopback: one lifecycle for every server rubricgym starts.

A server (AppWorld's environment server, the llama.cpp server) runs as a child process on
a free 127.0.0.1 port. The kernel signals it when its parent dies (Linux
``PR_SET_PDEATHSIG``), so a killed script never leaves one holding the CPU; ``stop`` sends
SIGTERM, waits on the PID, then SIGKILLs and reaps. Its output goes to a log file whose
tail explains a failed start.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["CLOCK_TICKS", "HOST", "ServerProcess", "free_port", "owner_pid", "pid_alive", "process_cpu_seconds",
           "process_tree", "sweep_stale", "tree_cpu_seconds"]

HOST = "127.0.0.1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # /proc/<pid>/stat counts CPU time in these
_PR_SET_PDEATHSIG = 1


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago (the caller retries if it is taken before bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of ``pid`` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _proc_stats() -> dict[int, tuple[int, float]]:
    """Every process's (parent PID, CPU seconds), from one read of each /proc/<pid>/stat."""
    stats: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:  # os.open/os.read: half the time of open() here, and this runs twice a step
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
            finally:
                os.close(fd)
        except (OSError, IndexError):
            continue
        stats[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return stats


def process_tree(root: int, stats: dict[int, tuple[int, float]] | None = None) -> list[int]:
    """``root`` and every live process descending from it ([] once it is gone)."""
    stats = _proc_stats() if stats is None else stats
    if root not in stats:
        return []
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds of ``root`` and its live descendants (None once ``root`` is gone); one pass
    over /proc (a process started in a bubblewrap sandbox is a descendant: its init adopts orphans)."""
    stats = _proc_stats()
    tree = process_tree(root, stats)
    return sum(stats[pid][1] for pid in tree) if tree else None


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_pid(name: str, prefix: str) -> int | None:
    """The PID written right after ``prefix`` in ``name`` (``<prefix><pid>-...`` or
    ``<prefix><pid>_...``), or None."""
    if not name.startswith(prefix):
        return None
    digits = ""
    for char in name[len(prefix):]:
        if not char.isascii() or not char.isdigit():
            break
        digits += char
    return int(digits) if digits and len(digits) < 10 else None


def sweep_stale(folder: str | Path, prefix: str) -> list[Path]:
    """Remove what a killed process left in ``folder``: every entry named ``<prefix><pid>...``
    whose owner process no longer exists (files and folders; links are removed, never
    followed). Returns what was removed; what cannot be removed is left."""
    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for path in entries:
        pid = owner_pid(path.name, prefix)
        if pid is None or pid == os.getpid() or pid_alive(pid):
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


def _child_setup(death_signal: int, memory_cap_bytes: int | None) -> Callable[[], None]:
    def setup() -> None:  # runs in the child between fork and exec: only prctl and setrlimit
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, death_signal)
        except OSError:
            pass
        if memory_cap_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_cap_bytes, memory_cap_bytes))

    return setup


class ServerProcess:
    """One server child process: ``start``, ``wait_ready``, ``stop``/``kill``, ``log_tail``.

    ``log_path`` None writes the output to a temporary file removed at ``stop``; its name
    holds the owner's PID, and temporary logs of owners that died (killed before ``stop``)
    are removed at ``start``.
    ``new_session`` puts the child in its own session (a terminal's Ctrl-C reaches only the
    parent, which then stops it in order). ``pipes``: stdin and stdout are pipes to the owner
    (a line protocol), stderr alone goes to the log."""

    def __init__(self, command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                 log_path: str | Path | None = None, log_prefix: str = "rubricgym-server-",
                 death_signal: int = signal.SIGKILL, memory_cap_bytes: int | None = None, new_session: bool = False,
                 pipes: bool = False):
        self.command = [str(c) for c in command]
        self.env = dict(env) if env is not None else None
        self.cwd = str(cwd) if cwd is not None else None
        self.log_path = Path(log_path) if log_path is not None else None
        self.log_prefix = log_prefix
        self.death_signal = death_signal
        self.memory_cap_bytes = memory_cap_bytes
        self.new_session = new_session
        self.pipes = pipes  # stdin and stdout are pipes to the owner (stderr goes to the log)
        self.process: subprocess.Popen[bytes] | None = None
        self._temp_log: Path | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def start(self) -> None:
        """Start the child (a running one is left as it is)."""
        if self.alive():
            return
        self._close_log()
        if self.log_path is None:
            # the owner's PID in the name: a log left by a killed owner is swept at the next start
            sweep_stale(tempfile.gettempdir(), self.log_prefix)
            fd, name = tempfile.mkstemp(prefix=f"{self.log_prefix}{os.getpid()}-", suffix=".log")
            self._temp_log = Path(name)
            log = os.fdopen(fd, "wb")
        else:
            log = open(self.log_path, "wb")  # noqa: SIM115 (the child holds it; closed right after Popen)
        with log:
            self.process = subprocess.Popen(
                self.command, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE if self.pipes else subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.pipes else log, stderr=log if self.pipes else subprocess.STDOUT,
                start_new_session=self.new_session,
                preexec_fn=(_child_setup(self.death_signal, self.memory_cap_bytes)  # noqa: PLW1509
                            if sys.platform == "linux" else None),
            )

    def wait_ready(self, ready: Callable[[], bool], timeout_s: float, poll_s: float = 0.1) -> bool:
        """Poll ``ready()`` until it is true (True), the child exits or ``timeout_s`` passes (False)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            if ready():
                return True
            time.sleep(poll_s)
        return False

    @property
    def current_log(self) -> Path | None:
        """Where the child's output goes now: ``log_path``, else the temporary log (None when not started)."""
        return self.log_path or self._temp_log

    def log_tail(self, chars: int = 3000) -> str:
        path = self.current_log
        if path is None:
            return ""
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 4 * chars))
                return fh.read().decode("utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, grace_s: float = 10.0) -> bool:
        """SIGTERM, wait up to ``grace_s`` on the PID, then SIGKILL and reap. True when the
        child ended within the grace period (or was not running)."""
        graceful = True
        if self.alive():
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                graceful = False
        self.kill()
        return graceful

    def kill(self) -> None:
        """Immediate SIGKILL and reap; removes a temporary log."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    pipe.close()
            self.process = None
        self._close_log()

    def _close_log(self) -> None:
        if self._temp_log is not None:
            self._temp_log.unlink(missing_ok=True)
            self._temp_log = None
