"""AppWorld's engine: its environment server (one process per concurrent env, on a loopback
free port) and the HTTP client that talks to it.

AppWorld keeps one world per server process, so each env owns its server. The process
lifecycle (parent-death signal, own session, address-space cap ``memory_cap_bytes``,
SIGTERM then SIGKILL) is ``rubricgym.servers.ServerProcess``; here are AppWorld's own parts:
the health probe, start retries on a taken port, a registry stopped at exit, a minimal
child environment, and ``watch``, which kills a server whose agent code sits in C past
its CPU budget (``cpu_s`` is enforced inside the server, where Python code runs).

With ``outputs`` set, the server is only the code shell: it runs inside the sandbox of
``sandbox.py``, is reached over a Unix socket, and its worlds call the apps, which live in a
second process (``apps_server.py``), over another; the two start, restart and stop together.
The shell's CPU and memory are then those of every process in its sandbox (the code may start
processes there) plus what its ``/tmp`` holds (``usage.py``), and ``pid`` is bubblewrap's, whose
end ends them all. ``watch`` then also kills the sandbox once it holds more than the memory
cap or its outputs folder more than ``outputs_cap_bytes``, while the step runs.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import threading
import weakref
from pathlib import Path
from typing import Any

import httpx

from rubricgym.adapters.appworld.apps_server import AppsProcess, Sockets
from rubricgym.adapters.appworld.paths import appworld_python
from rubricgym.adapters.appworld.sandbox import check_sandbox, server_sandbox, write_seccomp_filter
from rubricgym.adapters.appworld.usage import (
    MAX_OUTPUT_ENTRIES,
    Census,
    Trash,
    clear_folder,
    take_census,
    tmpfs_bytes,
)
from rubricgym.servers import HOST, ServerProcess, free_port, process_cpu_seconds, process_tree, tree_cpu_seconds

log = logging.getLogger(__name__)
SERVE_SCRIPT = Path(__file__).with_name("serve_app.py")
SHELL_SCRIPTS = (SERVE_SCRIPT, Path(__file__).with_name("apis_client.py"))  # what the shell's sandbox sees
_LIVE: weakref.WeakSet[AppWorldServer] = weakref.WeakSet()
DEFAULT_MEMORY_CAP_BYTES = 4 * 1024**3
DEFAULT_OUTPUTS_CAP_BYTES = 256 * 1024**2
WATCH_POLL_S = 0.1  # how often a step's watchdog looks at the sandbox
SCRUBBED_TMP_BYTES = 1024**2  # a /tmp still holding this much after it was emptied is held open: replace the sandbox
START_ATTEMPTS = 3  # the free port can be taken between probe and bind
SANDBOX_BASE_URL = "http://appworld"
SECCOMP_FILE = "seccomp.bpf"  # in the socket folders' root, which no sandbox sees  # the host part of requests over the Unix socket


class ServerStartError(RuntimeError):
    """The AppWorld server process did not come up."""


class ServerCallError(RuntimeError):
    """A call to the server failed in transport; ``hung`` when it stopped answering in time."""

    def __init__(self, message: str, hung: bool = False):
        super().__init__(message)
        self.hung = hung


def process_rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None


def tree_rss_bytes(root: int) -> int | None:
    sizes = [process_rss_bytes(pid) for pid in process_tree(root)]
    return sum(s for s in sizes if s is not None) if sizes else None


class AppWorldServer:
    """One AppWorld environment server process on 127.0.0.1.

    ``stop`` sends SIGTERM and waits on the PID (AppWorld can take 12-35 s to exit after
    many worlds), then SIGKILL after ``stop_grace_s``.
    """

    def __init__(self, data_root: str | Path, start_timeout_s: float = 120.0, stop_grace_s: float = 10.0,
                 memory_cap_bytes: int | None = DEFAULT_MEMORY_CAP_BYTES, cpu_s: float = 0.0,
                 outputs: Path | None = None, outputs_cap_bytes: int | None = DEFAULT_OUTPUTS_CAP_BYTES):
        self.data_root = Path(data_root)
        self.outputs = outputs  # set: sandboxed, and the only folder the server may write
        # what the outputs folder held in earlier episodes, moved out of the sandbox's sight and removed
        self.outputs_trash = Trash(outputs.with_name(outputs.name + ".trash")) if outputs is not None else None
        self.sockets: Sockets | None = Sockets.create() if outputs is not None else None
        self.apps: AppsProcess | None = None  # sandboxed: the apps' process, started with the shell
        self.memory_cap_bytes = memory_cap_bytes
        self.outputs_cap_bytes = outputs_cap_bytes
        self.cpu_s = float(cpu_s)
        self.killed_for: str | None = None  # "cpu", "memory" or "disk" when a watchdog killed the process
        self.killed_detail = ""  # what the watchdog saw when it killed
        self.own_pids: frozenset[int] = frozenset()  # sandboxed: bwrap, its init and the server, once started
        self.server_pid: int | None = None  # sandboxed: the server's process inside the sandbox
        self.start_timeout_s = start_timeout_s
        self.stop_grace_s = stop_grace_s
        self.port: int | None = None
        self.starts = 0
        self._server: ServerProcess | None = None
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None  # one client: building one costs an SSL context
        self._control_http: httpx.Client | None = None

    @property
    def sandboxed(self) -> bool:
        return self.outputs is not None

    @property
    def socket(self) -> Path | None:
        """The code shell's socket (None when not sandboxed or stopped)."""
        return self.sockets.path("shell") if self.sockets is not None else None

    @property
    def control_socket(self) -> Path | None:
        """The apps' control socket: rubricgym's and the evaluator's, never the shell's."""
        return self.sockets.path("control") if self.sockets is not None else None

    @property
    def url(self) -> str:
        if self.sandboxed:
            return SANDBOX_BASE_URL
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://{HOST}:{self.port}"

    def http_client(self, timeout_s: float | None = None, control: bool = False) -> httpx.Client:
        """A client for this server: over the Unix socket when sandboxed, else loopback TCP;
        ``control``: for the apps' control socket."""
        uds = self.control_socket if control else self.socket
        transport = httpx.HTTPTransport(uds=str(uds)) if self.sandboxed else None
        return httpx.Client(base_url=self.url, timeout=timeout_s, transport=transport, trust_env=False)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The server's process (None when stopped)."""
        return self._server.process if self._server is not None else None

    @property
    def pid(self) -> int | None:
        return self._server.pid if self._server is not None else None

    @property
    def returncode(self) -> int | None:
        return self._server.returncode if self._server is not None else None

    def alive(self) -> bool:
        """The shell (and, sandboxed, the apps' process) running."""
        return self._server is not None and self._server.alive() and (self.apps is None or self.apps.alive())

    def healthy(self, timeout_s: float = 2.0) -> bool:
        if not self.alive():
            return False
        if self._http is None:
            self._http = self.http_client()
        clients = [self._http]
        if self.sandboxed:
            if self._control_http is None:
                self._control_http = self.http_client(control=True)
            clients.append(self._control_http)
        try:
            return all(client.get("/", timeout=timeout_s).status_code == 200 for client in clients)
        except httpx.HTTPError:
            return False

    def _command(self, python: Path) -> list[str]:
        if self.outputs is None:
            return [str(python), str(SERVE_SCRIPT), "--port", str(self.port), "--root", str(self.data_root),
                    "--cpu-s", str(self.cpu_s)]
        assert self.sockets is not None
        sandbox = server_sandbox(check_sandbox(), python, SHELL_SCRIPTS, self.data_root, self.outputs,
                                 self.sockets.root / "shell", self.sockets.root / "apis",
                                 task_view=self.sockets.task_view, tmp_bytes=self.memory_cap_bytes,
                                 seccomp=write_seccomp_filter(self.sockets.root / SECCOMP_FILE))
        return sandbox.command([str(python), str(SERVE_SCRIPT), "--uds", str(self.socket), "--root",
                                str(self.data_root), "--cpu-s", str(self.cpu_s), "--apis-uds",
                                str(self.sockets.path("apis"))])

    def _start_apps(self, python: Path) -> None:
        """Start the apps' process (its readiness is checked with the shell's, in ``healthy``)."""
        assert self.sockets is not None
        if self.sockets.root.exists():
            self.sockets.clear()
        else:  # stopped earlier: new folders
            self.sockets = Sockets.create()
        self.apps = AppsProcess(check_sandbox(), python, self.data_root, self.sockets, self.memory_cap_bytes)
        self.apps.start()

    def _child_env(self) -> dict[str, str]:
        """A minimal environment: agent code runs in this process, so it inherits no credentials."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "APPWORLD_ROOT": str(self.data_root),
            "PYTHONUNBUFFERED": "1",
        }

    def start(self) -> None:
        with self._lock:
            if self.alive():
                return
            python = appworld_python()
            self._empty_outputs()  # a fresh sandbox starts with an empty outputs folder
            for attempt in range(START_ATTEMPTS):
                if self.sandboxed:
                    self._start_apps(python)  # both load AppWorld at once: they start side by side
                else:
                    self.port = free_port()
                self.killed_for, self.killed_detail = None, ""
                self.own_pids, self.server_pid = frozenset(), None
                # sandboxed, bwrap is the sandbox's PID 1 (its environment is readable there): it gets none
                self._server = ServerProcess(self._command(python), env={} if self.sandboxed else self._child_env(),
                                             cwd=self.data_root, log_prefix="appworld-server-",
                                             memory_cap_bytes=self.memory_cap_bytes, new_session=True)
                self._server.start()
                _LIVE.add(self)
                if self._server.wait_ready(lambda: self.healthy(timeout_s=1.0), self.start_timeout_s):
                    self.starts += 1
                    if self.sandboxed:
                        self._note_own_processes()
                    return
                tail = self.log_tail() + (f"\n[apps process]\n{self.apps.log_tail()}" if self.apps else "")
                self._kill()
                if "address already in use" not in tail.lower():
                    raise ServerStartError(f"AppWorld server did not start (attempt {attempt + 1}):\n{tail}")
            raise ServerStartError("AppWorld server did not start: no free port could be bound")

    def _note_own_processes(self) -> None:
        """The sandbox's own processes once it serves: bwrap, its init and the server (the
        deepest); any other process in it later is the code's."""
        census = take_census(self.pid, None, None) if self.pid is not None else None
        pids = census.pids if census is not None else ()
        self.own_pids = frozenset(pids)
        self.server_pid = pids[-1] if len(pids) > 1 else None

    def log_tail(self, chars: int = 3000) -> str:
        return self._server.log_tail(chars) if self._server is not None else ""

    def stop(self) -> None:
        """SIGTERM, wait on the PID up to ``stop_grace_s``, then SIGKILL and reap; sandboxed, the
        apps' process too, and the socket folders are removed."""
        with self._lock:
            if self._server is not None:
                pid = self._server.pid
                if not self._server.stop(self.stop_grace_s):
                    log.warning("AppWorld server pid %s ignored SIGTERM for %.0f s; killing", pid, self.stop_grace_s)
            self._kill()
            if self.sockets is not None:
                self.sockets.remove()

    def kill(self) -> None:
        """Immediate SIGKILL (a hung server cannot shut down gracefully)."""
        with self._lock:
            self._kill()

    def _kill(self) -> None:
        if self._server is not None:
            self._server.kill()
            self._server = None
        if self.apps is not None:
            self.apps.kill()
            self.apps = None
        for client in (self._http, self._control_http):
            if client is not None:
                client.close()
        self._http = self._control_http = None
        if self.sockets is not None and self.sockets.root.exists():
            self.sockets.clear()
        _LIVE.discard(self)

    def cpu_seconds(self) -> float | None:
        """CPU seconds the server used (every process of its sandbox when sandboxed)."""
        pid = self.pid
        if pid is None:
            return None
        return tree_cpu_seconds(pid) if self.sandboxed else process_cpu_seconds(pid)

    def rss_bytes(self) -> int | None:
        pid = self.pid
        if pid is None:
            return None
        return tree_rss_bytes(pid) if self.sandboxed else process_rss_bytes(pid)

    def census(self) -> Census | None:
        """Sandboxed: one look at the sandbox (processes, CPU, memory, /tmp, outputs); None when
        not sandboxed or stopped."""
        if not self.sandboxed or self.pid is None:
            return None
        stop = self.outputs_cap_bytes + 1 if self.outputs_cap_bytes else None
        return take_census(self.pid, self.server_pid, self.outputs, stop)

    def over_limits(self, census: Census) -> tuple[str, str] | None:
        """("memory" | "disk", what) when the census is past the sandbox's memory cap or outputs quota."""
        gb = 1024**3
        if self.memory_cap_bytes and census.memory_bytes > self.memory_cap_bytes:
            return "memory", (f"the sandbox held {census.memory_bytes / gb:.2f} GB, past its memory cap of "
                              f"{self.memory_cap_bytes / gb:g} GB ({census.describe()})")
        if self.outputs_cap_bytes and census.outputs_bytes > self.outputs_cap_bytes:
            return "disk", (f"the outputs folder held {census.outputs_bytes / 1024**2:.0f} MB, past its quota of "
                            f"{self.outputs_cap_bytes / 1024**2:g} MB ({census.describe()})")
        if census.outputs_entries > MAX_OUTPUT_ENTRIES:
            return "disk", f"the outputs folder held more than {MAX_OUTPUT_ENTRIES} entries ({census.describe()})"
        return None

    def kill_for(self, reason: str, detail: str) -> None:
        """SIGKILL the sandbox (its namespace, its processes and its /tmp end with bwrap), noting why;
        the caller's server call then fails and reports it."""
        self.killed_for, self.killed_detail = reason, detail
        pid = self.pid
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def scrub(self) -> bool:
        """Sandboxed, between episodes: empty the sandbox's ``/tmp`` (mount points bubblewrap made
        there are kept) and the outputs folder, from outside. False when ``/tmp`` could not be
        read or still holds data (a file the server keeps open): then the sandbox must be replaced."""
        if not self.sandboxed or self.server_pid is None:
            return True
        tmp = f"/proc/{self.server_pid}/root/tmp"
        if not os.path.isdir(tmp):
            return False
        clear_folder(tmp)
        self._empty_outputs()
        left = tmpfs_bytes(tmp)
        return left is not None and left < SCRUBBED_TMP_BYTES

    def _empty_outputs(self) -> None:
        if self.outputs is not None and self.outputs_trash is not None:
            try:
                entries = list(self.outputs.iterdir())
            except OSError:
                return
            self.outputs_trash.take(entries)

    def show_task(self, task_id: str) -> None:
        """Sandboxed: the only task folder the shell's sandbox shows is ``task_id``'s."""
        if self.sockets is not None:
            self.sockets.show_task(self.data_root, task_id)

    def watch(self, limit_s: float, poll_s: float = WATCH_POLL_S, start_cpu_s: float | None = None) -> StepWatch:
        """A watchdog for one call: SIGKILL the server once it used ``limit_s`` more CPU seconds
        (agent code in C ignores the in-server budget's signal; 0: no CPU limit) and, sandboxed,
        once the sandbox is past its memory cap or outputs quota. ``start_cpu_s``: a reading of
        ``cpu_seconds()`` taken just before (saves a second one)."""
        return StepWatch(self, limit_s, poll_s, start_cpu_s)

    def restart(self) -> None:
        self.kill()
        self.start()

    def __del__(self) -> None:
        try:
            self._kill()
            if self.sockets is not None:
                self.sockets.remove()
        except Exception:
            pass


class StepWatch:
    """Context manager around one server call; see ``AppWorldServer.watch``."""

    def __init__(self, server: AppWorldServer, limit_s: float, poll_s: float, start_cpu_s: float | None = None):
        self.server, self.limit_s, self.poll_s, self.start_cpu_s = server, limit_s, poll_s, start_cpu_s
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _watch(self, start: float) -> None:
        server = self.server
        while not self._done.wait(self.poll_s):
            if server.sandboxed:
                census = server.census()
                if census is None:
                    return
                used, breach = census.cpu_s, server.over_limits(census)
                if breach is not None:
                    server.kill_for(*breach)
                    return
            else:
                used = server.cpu_seconds()
                if used is None:
                    return
            if self.limit_s > 0 and used - start > self.limit_s:
                server.kill_for("cpu", f"{used - start:.1f} CPU s in this step")
                return

    def __enter__(self) -> StepWatch:
        start = self.start_cpu_s if self.start_cpu_s is not None else self.server.cpu_seconds()
        watching = self.limit_s > 0 or (self.server.sandboxed and (self.server.memory_cap_bytes
                                                                   or self.server.outputs_cap_bytes))
        if self.server.pid is not None and start is not None and watching:
            self._thread = threading.Thread(target=self._watch, args=(start,), daemon=True)
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


class EnvironmentClient:
    """Calls the server's ``/initialize``, ``/execute_tracked``, ``/task_completed``,
    ``/evaluate``, ``/close``, with a bound on every call. Any transport problem (refused or
    dropped connection, timeout, non-200 answer) becomes ``ServerCallError``."""

    def __init__(self, server: AppWorldServer, call_timeout_s: float, control: bool = False):
        self.url = server.url
        self.call_timeout_s = call_timeout_s
        self._http = server.http_client(call_timeout_s, control=control)

    def call(self, method: str, timeout_s: float | None = None, **payload: Any) -> Any:
        try:
            response = self._http.post("/" + method, json=payload, timeout=timeout_s or self.call_timeout_s)
        except httpx.TimeoutException as exc:
            raise ServerCallError(f"AppWorld server did not answer /{method} within "
                                  f"{timeout_s or self.call_timeout_s:.0f} s", hung=True) from exc
        except httpx.HTTPError as exc:
            raise ServerCallError(f"AppWorld server unreachable on /{method}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise ServerCallError(f"AppWorld server /{method} answered {response.status_code}: {response.text[:500]}")
        try:
            return response.json()["output"]
        except (ValueError, KeyError) as exc:
            raise ServerCallError(f"AppWorld server /{method} sent a malformed answer: {response.text[:200]}") from exc

    def close(self) -> None:
        self._http.close()
