"""A spawned process that answers JSON requests over a pipe: what the trainer's env workers
and ``rubricgym serve-env``'s session workers are built on.

Envs run in processes of their own, never in threads: the engines change process-wide state
(random generators, working directory, environment variables). Requests and answers are JSON
bytes (``send_bytes`` / ``recv_bytes``): nothing from a worker is unpickled. Every wait is
bounded; a worker that exits, closes its pipe or does not answer in time is a ``WorkerDied``
(and is killed), never a hang.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

log = logging.getLogger(__name__)

__all__ = ["JsonHost", "JsonWorker", "PendingAnswer", "WorkerDied", "close_each", "serve_json"]


class WorkerDied(RuntimeError):
    """The worker process ended (or stopped answering) during a call."""


class JsonHost(Protocol):
    """What a worker process serves: one JSON request in, one JSON answer out."""

    def handle(self, request: str) -> str: ...

    def close(self) -> None: ...


def serve_json(conn: Any, host: JsonHost) -> None:
    """A worker's loop: answer requests until ``{"op": "close"}`` or the pipe ends (the parent
    is gone: so are we); the host is closed either way."""
    try:
        while True:
            try:
                request = conn.recv_bytes().decode("utf-8")
            except (EOFError, OSError):
                break
            conn.send_bytes(host.handle(request).encode("utf-8"))
            if json.loads(request).get("op") == "close":
                break
    finally:
        host.close()


def close_each(envs: Iterable[Any], where: str) -> None:
    """Close every env a host holds; one that fails to close is logged, the others still close."""
    for env in envs:
        try:
            env.close()
        except Exception:  # closing must not hide the others, nor the run's own result
            log.exception("closing an env in %s failed", where)


class PendingAnswer:
    """The answer to one submitted request, waited for with a time-out."""

    def __init__(self, worker: JsonWorker):
        self.worker = worker

    def result(self, timeout: float) -> str:
        w = self.worker
        deadline = time.monotonic() + timeout
        while True:
            try:
                if w.conn.poll(0.05):
                    return w.conn.recv_bytes().decode("utf-8")
            except (EOFError, OSError) as exc:
                raise WorkerDied(f"{w.name}: pipe closed ({type(exc).__name__})") from exc
            if not w.proc.is_alive():
                raise WorkerDied(f"{w.name}: process exited with code {w.proc.exitcode}")
            if time.monotonic() > deadline:
                w.kill()
                raise WorkerDied(f"{w.name}: no answer within {timeout:.0f} s (killed)")


class JsonWorker:
    """One spawned process running ``target(conn, *args)`` (which calls ``serve_json``).
    ``args`` must pickle: they are the spawn's start-up arguments, sent by this process."""

    def __init__(self, target: Callable[..., None], args: tuple[Any, ...], name: str):
        ctx = multiprocessing.get_context("spawn")  # torch and the engines are not fork-safe once loaded
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=target, args=(child, *args), daemon=True, name=f"rubricgym-{name}")
        self.proc.start()
        child.close()
        self.name = f"{name} (pid {self.proc.pid})"

    def submit(self, request: str) -> PendingAnswer:
        try:
            self.conn.send_bytes(request.encode("utf-8"))
        except (BrokenPipeError, OSError):
            pass  # the answer's wait reports the dead process
        return PendingAnswer(self)

    def request(self, request: str, timeout: float) -> str:
        return self.submit(request).result(timeout)

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=10)

    def close(self, timeout: float) -> None:
        """Ask the host to close, wait for the process, kill it if it lingers."""
        try:
            if self.proc.is_alive():
                self.request(json.dumps({"op": "close"}), timeout)
        except WorkerDied:
            pass
        self.proc.join(timeout=timeout)
        if self.proc.is_alive():
            self.kill()
        self.conn.close()
