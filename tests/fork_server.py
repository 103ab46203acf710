"""Test processes forked from one warm interpreter: a fork server.

A test that starts the trainer as separate processes (the ranks of a 2-rank run) pays, in every
one of them, for importing torch, transformers, peft and the trainer: about 5 s of CPU on an idle
core, several times that on the loaded cores of a test run, and test_distributed starts dozens.
The server imports those modules once, in a process of its own that has run nothing else (no
threads, no torch computation: forking it is safe), and forks a child per launch. The child takes
the launch's environment, working folder, arguments and output files and runs the script as
``python SCRIPT ARGS`` would: it is a real, separate process with its own process group, signals
and exit code. What it shares with the server is what import already fixed: the modules'
import-time state and the hash seed (so the environment the server starts with must be the one
those imports should see, e.g. ``OMP_NUM_THREADS``).

``python tests/fork_server.py SOCKET MODULE...`` serves; ``ForkServer`` starts it and launches.
Each launch is one connection: the request (a JSON line), then the server's forked "waiter"
answers with the child's pid and, when the child ends, its exit code (``-N`` for signal N, as
``subprocess`` reports it).
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = Path(__file__).resolve()
STARTUP_S = 600  # importing the modules on a loaded machine


# ---- the server -------------------------------------------------------------------------------
def _become(request: dict) -> None:
    """In the forked child: take the launch's stdio, folder, environment and arguments, run the
    script as ``__main__`` and leave through ``SystemExit`` (interpreter shutdown as usual)."""
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["script"]
    sys.argv = [script, *request["args"]]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")
    raise SystemExit(0)


def _serve_one(listener: socket.socket, conn: socket.socket) -> None:
    """Fork a waiter that forks the child, reports its pid and, when it ends, its exit code."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            conn.close()
            return
        data += chunk
    request = json.loads(data)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() != 0:  # the server: the waiter owns the connection now
        conn.close()
        return
    listener.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the waiter waits for its child
    child = os.fork()
    if child == 0:
        conn.close()
        _become(request)
    try:
        conn.sendall(json.dumps({"pid": child}).encode() + b"\n")
        _, status = os.waitpid(child, 0)
        conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    finally:
        os._exit(0)


def serve(path: str, modules: list[str]) -> None:
    for name in modules:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the waiters
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".binding")
    listener.listen(64)
    os.rename(path + ".binding", path)  # the socket's file appears when the server accepts: "ready"
    while True:  # until the client closes our stdin (or dies)
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1024):
            break
        if listener in readable:
            conn, _ = listener.accept()
            _serve_one(listener, conn)
    listener.close()


# ---- the client -------------------------------------------------------------------------------
class ForkedProcess:
    """The part of ``subprocess.Popen`` the tests use, for a child of the fork server."""

    def __init__(self, conn: socket.socket, args: list[str], stdout: Path, stderr: Path):
        self.conn, self.args, self.stdout_path, self.stderr_path = conn, args, stdout, stderr
        self.buffer = b""
        self.returncode: int | None = None
        first = self._line(timeout=60)
        if first is None or "pid" not in first:
            raise RuntimeError(f"the fork server did not start {args}")
        self.pid: int = first["pid"]

    def _line(self, timeout: float | None) -> dict | None:
        """The next message, or None when none came within ``timeout`` seconds."""
        while b"\n" not in self.buffer:
            readable, _, _ = select.select([self.conn], [], [], timeout)
            if not readable:
                return None
            chunk = self.conn.recv(4096)
            if not chunk:
                raise RuntimeError(f"the fork server's waiter for pid {getattr(self, 'pid', '?')} went away")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            message = self._line(timeout)
            if message is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = message["returncode"]
            self.conn.close()
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return (self.stdout_path.read_text(encoding="utf-8", errors="replace"),
                self.stderr_path.read_text(encoding="utf-8", errors="replace"))

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class ForkServer:
    """A fork server that has imported ``modules`` in ``env``; ``launch`` runs a script in a
    child of it. ``close`` ends the server (children still running keep running)."""

    def __init__(self, modules: list[str], env: dict[str, str], cwd: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="fork-server-"))
        self.socket_path = str(self.dir / "socket")
        self.launches = 0
        log = (self.dir / "server.log").open("w")  # what the imports print
        self.process = subprocess.Popen([sys.executable, str(SERVER), self.socket_path, *modules], env=env, cwd=cwd,
                                        stdin=subprocess.PIPE, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + STARTUP_S
        while not os.path.exists(self.socket_path):  # bound once every module is imported
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.dir / "server.log").read_text(errors="replace")[-3000:]
                self.close()
                raise RuntimeError(f"the fork server did not start:\n{log}")
            time.sleep(0.05)

    def launch(self, script: Path, args: list[str], env: dict[str, str], cwd: Path) -> ForkedProcess:
        self.launches += 1
        out, err = self.dir / f"{self.launches}.out", self.dir / f"{self.launches}.err"
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.socket_path)
        request = {"script": str(script), "args": args, "env": env, "cwd": str(cwd), "stdout": str(out),
                   "stderr": str(err)}
        conn.sendall(json.dumps(request).encode() + b"\n")
        return ForkedProcess(conn, [str(script), *args], out, err)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
