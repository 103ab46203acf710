"""Real ``rubricgym serve-env`` servers (uvicorn, 127.0.0.1) for the remote-env tests."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import pytest
from requirements_guard import need

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"serving \S+ at (http://127\.0\.0\.1:(\d+))")


class Served:
    """One server process: its URL, and how to stop (or kill) it."""

    def __init__(self, proc: subprocess.Popen, url: str, port: int, argv: list[str], line: str = ""):
        self.proc, self.url, self.port, self.argv, self.line = proc, url, port, argv, line

    def kill(self) -> None:
        """SIGKILL the server and its session workers (its process group), as a crash would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None or _group_alive(self.proc.pid):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def start_server(env_id: str, *options: str, kwargs: dict | None = None, port: int = 0,
                 timeout_s: float = 120.0) -> Served:
    """Start ``rubricgym serve-env`` and wait (bounded) for the line naming its port."""
    argv = [sys.executable, "-m", "rubricgym.cli", "serve-env", env_id, "--port", str(port),
            "--kwargs", json.dumps(kwargs or {}), *options]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + timeout_s
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # the server prints its line, or dies (EOF)
        if not line:
            break
        lines.append(line)
        match = READY.search(line)
        if match:
            served = Served(proc, match.group(1), int(match.group(2)), argv, line)
            _wait_healthy(served, deadline)
            return served
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"serve-env did not start within {timeout_s:.0f} s:\n{''.join(lines)[-3000:]}")


def _wait_healthy(served: Served, deadline: float) -> None:
    import httpx

    while time.monotonic() < deadline:
        try:
            if httpx.get(served.url + "/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("serve-env never answered /health")


@pytest.fixture(autouse=True)
def _openenv_installed() -> None:
    need("rubricgym.remote.openenv_core", "pip install 'rubricgym[openenv]'")  # openenv.core, as rubricgym loads it


# The served ALFWorld that tests only playing episodes on share (the module's tests that start
# the same server with the same options): each episode starts with a reset (task and seed
# given), and each test closes the sessions it opened. Their xdist group keeps them on one
# worker, so the server starts once. Tests that kill, hang or reconfigure a server start their own.
SERVED_ALFWORLD = pytest.mark.xdist_group("served-alfworld")
SERVED_ALFWORLD_MAX_STEPS = 6  # the parity test's budget (it truncates an episode there)


@pytest.fixture(scope="session")
def _served_alfworld() -> Iterator[list[Served]]:
    holder: list[Served] = []
    yield holder
    for served in holder:
        served.stop()


@pytest.fixture
def alfworld_server(_served_alfworld: list[Served]) -> Served:
    """``rubricgym serve-env ALFWorld-Rubric-v0`` on the bundled games, ``--max-steps 6
    --max-sessions 2 --workers 1``, started once and shared; started afresh if it has died."""
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT

    if not _served_alfworld or _served_alfworld[-1].proc.poll() is not None:
        _served_alfworld.append(start_server(
            "ALFWorld-Rubric-v0", "--max-steps", str(SERVED_ALFWORLD_MAX_STEPS), "--max-sessions", "2",
            "--workers", "1", kwargs={"data_path": str(BUNDLED_ROOT)}))
    return _served_alfworld[-1]


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """``closing(remote_env)``: closed after the test even when it fails, so a shared server's
    session is given back (closing one twice is harmless)."""
    opened: list[Any] = []

    def _closing(env: Any) -> Any:
        opened.append(env)
        return env

    yield _closing
    for env in opened:
        env.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """``serve(env_id, *cli_options, kwargs=...)``: a server stopped after the test."""
    started: list[Served] = []

    def _serve(env_id: str, *options: str, **kw) -> Served:
        served = start_server(env_id, *options, **kw)
        started.append(served)
        return served

    yield _serve
    for served in started:
        served.stop()
