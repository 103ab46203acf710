"""AppWorld's evaluation outside the agent's sandbox: ``evaluate_app.py`` in a sandbox of its own
(ground truth visible, no agent code, nothing writable but an in-memory scratch folder, no
network), one process per env, started at the first evaluation and spoken to in JSON lines
over its stdin/stdout.

The end state it evaluates it reads from the apps' process over their control socket (the
one channel it is given), which agent code reaches only through the app APIs; a hostile end
state can at most fail or pass its own evaluation, since the evaluator can write nothing
and reach nothing else.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import threading
import time
from pathlib import Path
from typing import Any

from rubricgym.adapters.appworld.paths import appworld_python
from rubricgym.adapters.appworld.sandbox import check_sandbox, evaluator_sandbox
from rubricgym.servers import ServerProcess

log = logging.getLogger(__name__)
EVALUATE_SCRIPT = Path(__file__).with_name("evaluate_app.py")
MAX_ANSWER_BYTES = 8 * 1024 * 1024


class EvaluatorError(RuntimeError):
    """The evaluator process failed, hung or answered something else than a report."""


class SandboxedEvaluator:
    """``evaluate(task_id, experiment_name)`` -> AppWorld's test report as a dict."""

    def __init__(self, data_root: Path, control_socket: Path, start_timeout_s: float = 120.0,
                 memory_cap_bytes: int | None = None):
        self.data_root = data_root
        self.control_socket = control_socket  # the apps' end state is read there
        self.start_timeout_s = start_timeout_s
        self.memory_cap_bytes = memory_cap_bytes
        self._process: ServerProcess | None = None
        self._buffer = b""
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _start(self) -> ServerProcess:
        python = appworld_python()
        sandbox = evaluator_sandbox(check_sandbox(), python, [EVALUATE_SCRIPT], self.data_root,
                                    self.control_socket.parent)
        process = ServerProcess(sandbox.command([str(python), str(EVALUATE_SCRIPT), "--root", str(self.data_root),
                                                 "--apps-socket", str(self.control_socket)]),
                                env={}, log_prefix="appworld-evaluator-",  # the sandbox's PID 1: no host variable
                                memory_cap_bytes=self.memory_cap_bytes, new_session=True, pipes=True)
        process.start()
        self._process, self._buffer = process, b""
        try:
            ready = self._read_line(self.start_timeout_s)
        except EvaluatorError as exc:
            self.close()
            raise EvaluatorError(f"AppWorld's evaluator did not start: {exc}") from None
        if ready.get("ready") is not True:
            self.close()
            raise EvaluatorError(f"AppWorld's evaluator did not start: {ready}")
        return process

    def _read_line(self, timeout_s: float) -> dict[str, Any]:
        """One JSON line from the evaluator within ``timeout_s`` (bounded in size)."""
        assert self._process is not None and self._process.process is not None
        stdout = self._process.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EvaluatorError(f"no answer within {timeout_s:.0f} s")
                if not selector.select(left):
                    continue
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    raise EvaluatorError(f"the process exited:\n{self._process.log_tail(1500)}")
                self._buffer += chunk
                if len(self._buffer) > MAX_ANSWER_BYTES:
                    raise EvaluatorError(f"an answer over {MAX_ANSWER_BYTES} bytes")
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            answer = json.loads(line)
        except ValueError:
            raise EvaluatorError(f"an answer that is not JSON: {line[:200]!r}") from None
        if not isinstance(answer, dict):
            raise EvaluatorError(f"an answer that is not an object: {line[:200]!r}")
        return answer

    def _send(self, request: dict[str, Any]) -> ServerProcess:
        process = self._process if self._process is not None and self._process.alive() else self._start()
        assert process.process is not None and process.process.stdin is not None
        process.process.stdin.write(json.dumps(request).encode() + b"\n")
        process.process.stdin.flush()
        return process

    def prepare(self, task_id: str) -> None:
        """Have the task's start state loaded, and its end databases built as copies of it, while
        the episode plays (no answer is read); only once the process runs: it starts at the first
        evaluation (an env that never evaluates never pays for it), which prepares for itself."""
        with self._lock:
            if self._process is None or not self._process.alive():
                return
            try:
                self._send({"prepare": task_id})
            except (OSError, EvaluatorError) as exc:  # evaluate() starts it afresh and reports
                log.warning("AppWorld's evaluator could not prepare %r: %s", task_id, exc)
                self.close()

    def evaluate(self, task_id: str, experiment_name: str, timeout_s: float) -> dict[str, Any]:
        with self._lock:
            try:
                self._send({"task_id": task_id, "experiment_name": experiment_name})
                answer = self._read_line(timeout_s)
            except (OSError, EvaluatorError) as exc:
                self.close()  # a half-read answer would shift every later one: start afresh
                raise EvaluatorError(f"AppWorld's evaluator failed on {task_id!r}: {exc}") from None
        if "error" in answer or not isinstance(answer.get("output"), dict):
            raise EvaluatorError(f"AppWorld's evaluator could not evaluate {task_id!r}: {answer.get('error', answer)}")
        return answer["output"]

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process = None
