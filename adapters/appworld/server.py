"""AppWorld environment servers: one process per concurrent env, on a loopback free port.

AppWorld keeps one world per server process, so each env owns its server. Servers are
started in their own session with a parent-death signal, tracked in a registry and
stopped at exit, so none outlives the process that started it. Each server runs under an
address-space cap (``memory_cap_bytes``) and a CPU-time budget per execution (``cpu_s``,
enforced inside the server; ``watch_cpu`` kills a server whose agent code sits in C past it).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import resource
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path

import httpx

from rubricgym.adapters.appworld.paths import appworld_python

log = logging.getLogger(__name__)
SERVE_SCRIPT = Path(__file__).with_name("serve_app.py")
_LIVE: weakref.WeakSet[AppWorldServer] = weakref.WeakSet()
_PR_SET_PDEATHSIG = 1
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
DEFAULT_MEMORY_CAP_BYTES = 4 * 1024**3


class ServerStartError(RuntimeError):
    """The AppWorld server process did not come up."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _child_setup(memory_cap_bytes: int | None):
    def setup() -> None:  # runs in the child between fork and exec
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError:
            pass
        if memory_cap_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_cap_bytes, memory_cap_bytes))

    return setup


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of ``pid`` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def process_rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None


class AppWorldServer:
    """One AppWorld environment server process on 127.0.0.1.

    ``stop`` sends SIGTERM and waits on the PID (AppWorld can take 12-35 s to exit after
    many worlds), then SIGKILL after ``stop_grace_s``.
    """

    def __init__(self, data_root: str | Path, start_timeout_s: float = 120.0, stop_grace_s: float = 10.0,
                 memory_cap_bytes: int | None = DEFAULT_MEMORY_CAP_BYTES, cpu_s: float = 0.0):
        self.data_root = Path(data_root)
        self.memory_cap_bytes = memory_cap_bytes
        self.cpu_s = float(cpu_s)
        self.killed_for: str | None = None  # "cpu" when watch_cpu killed the process
        self.start_timeout_s = start_timeout_s
        self.stop_grace_s = stop_grace_s
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: tempfile._TemporaryFileWrapper[bytes] | None = None
        self.starts = 0
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None  # one client: building one costs an SSL context

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def healthy(self, timeout_s: float = 2.0) -> bool:
        if not self.alive():
            return False
        if self._http is None:
            self._http = httpx.Client(trust_env=False)
        try:
            return self._http.get(self.url + "/", timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False

    def start(self) -> None:
        with self._lock:
            if self.alive():
                return
            python = appworld_python()
            for attempt in range(3):  # the free port can be taken between probe and bind
                self.port = free_port()
                self._log_file = tempfile.NamedTemporaryFile(prefix="appworld-server-", suffix=".log")
                env = {  # a minimal environment: agent code runs in this process
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": os.environ.get("HOME", "/tmp"),
                    "LANG": os.environ.get("LANG", "C.UTF-8"),
                    "APPWORLD_ROOT": str(self.data_root),
                    "PYTHONUNBUFFERED": "1",
                }
                self.killed_for = None
                self.process = subprocess.Popen(
                    [str(python), str(SERVE_SCRIPT), "--port", str(self.port), "--root", str(self.data_root),
                     "--cpu-s", str(self.cpu_s)],
                    cwd=str(self.data_root),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=self._log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_child_setup(self.memory_cap_bytes),
                )
                _LIVE.add(self)
                if self._wait_ready():
                    self.starts += 1
                    return
                tail = self.log_tail()
                self._kill()
                if "address already in use" not in tail.lower():
                    raise ServerStartError(f"AppWorld server did not start (attempt {attempt + 1}):\n{tail}")
            raise ServerStartError("AppWorld server did not start: no free port could be bound")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            if self.healthy(timeout_s=1.0):
                return True
            time.sleep(0.1)
        return False

    def log_tail(self, chars: int = 3000) -> str:
        if self._log_file is None:
            return ""
        try:
            return Path(self._log_file.name).read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM, wait on the PID up to ``stop_grace_s``, then SIGKILL and reap."""
        with self._lock:
            if self.process is None:
                return
            if self.process.poll() is None:
                try:
                    self.process.terminate()
                    self.process.wait(timeout=self.stop_grace_s)
                except subprocess.TimeoutExpired:
                    log.warning("AppWorld server pid %s ignored SIGTERM for %.0f s; killing", self.pid,
                                self.stop_grace_s)
            self._kill()

    def kill(self) -> None:
        """Immediate SIGKILL (a hung server cannot shut down gracefully)."""
        with self._lock:
            self._kill()

    def _kill(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._http is not None:
            self._http.close()
            self._http = None
        _LIVE.discard(self)

    def cpu_seconds(self) -> float | None:
        return process_cpu_seconds(self.process.pid) if self.process is not None else None

    def rss_bytes(self) -> int | None:
        return process_rss_bytes(self.process.pid) if self.process is not None else None

    def watch_cpu(self, limit_s: float, poll_s: float = 0.25) -> CpuWatch:
        """A watchdog for one call: SIGKILL the server once it used ``limit_s`` more CPU seconds
        (agent code in C ignores the in-server budget's signal)."""
        return CpuWatch(self, limit_s, poll_s)

    def restart(self) -> None:
        self.kill()
        self.start()

    def __del__(self) -> None:
        try:
            self._kill()
        except Exception:
            pass


class CpuWatch:
    """Context manager around one server call; see ``AppWorldServer.watch_cpu``."""

    def __init__(self, server: AppWorldServer, limit_s: float, poll_s: float):
        self.server, self.limit_s, self.poll_s = server, limit_s, poll_s
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _watch(self, pid: int, start: float) -> None:
        while not self._done.wait(self.poll_s):
            used = process_cpu_seconds(pid)
            if used is None:
                return
            if used - start > self.limit_s:
                self.server.killed_for = "cpu"
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return

    def __enter__(self) -> CpuWatch:
        process = self.server.process
        start = process_cpu_seconds(process.pid) if process is not None else None
        if process is not None and start is not None and self.limit_s > 0:
            self._thread = threading.Thread(target=self._watch, args=(process.pid, start), daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop_grace_s = min(server.stop_grace_s, 5.0)
        server.stop()
