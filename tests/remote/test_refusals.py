"""The env server's clean refusals (issue 54, item 5): a bad HTTP reset is a 4xx with its
reason (no traceback in the log), frames past the limits behave as docs/remote.md says,
connections that never reset are closed so other clients get in, and connections are bounded."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from remote.conftest import start_server

pytestmark = pytest.mark.slow

ENV_ID = "SearchQA-Rubric-v0"


@pytest.fixture(autouse=True)
def _searchqa_installed():
    from requirements_guard import need

    need("bm25s", "pip install 'rubricgym[searchqa]'")


def _ws(url: str):
    from websockets.sync.client import connect

    return connect(url.replace("http://", "ws://") + "/ws", open_timeout=10, close_timeout=2, max_size=None)


def test_http_reset_refusals_are_4xx_with_the_reason_and_no_traceback():
    server = start_server(ENV_ID, "--max-sessions", "2", "--workers", "1")
    try:
        odd = httpx.post(server.url + "/reset", json={"seed": 0, "lucky": 7}, timeout=60)
        assert odd.status_code == 422 and "lucky" in odd.text
        unknown = httpx.post(server.url + "/reset", json={"seed": 0, "task_id": "no-such-task"}, timeout=60)
        assert unknown.status_code == 422 and "no-such-task" in unknown.json()["detail"]
        good = httpx.post(server.url + "/reset", json={"seed": 0}, timeout=60)
        assert good.status_code == 200
    finally:
        server.stop()
    log = server.proc.stdout.read()
    assert "Traceback" not in log, log[-3000:]


def test_frames_past_the_limits_behave_as_documented():
    """Over --max-message-bytes: an error reply, the session goes on; over 4x that, the
    WebSocket layer closes the connection with code 1009 (message too big)."""
    from websockets.exceptions import ConnectionClosed

    server = start_server(ENV_ID, "--max-sessions", "2", "--workers", "1", "--max-message-bytes", "65536")
    try:
        with _ws(server.url) as ws:
            ws.send(json.dumps({"type": "step", "data": {"action": "x" * 100_000}}))
            reply = json.loads(ws.recv(timeout=30))
            assert reply["type"] == "error" and "over this server's limit" in reply["data"]["message"]
            ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            assert json.loads(ws.recv(timeout=60))["type"] == "observation"  # the session goes on
        with _ws(server.url) as ws, pytest.raises(ConnectionClosed) as closed:
            ws.send(json.dumps({"type": "step", "data": {"action": "x" * 300_000}}))
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    finally:
        server.stop()


def test_connections_that_never_reset_are_closed_and_let_a_waiting_client_in():
    from rubricgym.remote.client import RemoteEnvError

    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the env ids)

    server = start_server(ENV_ID, "--max-sessions", "4", "--workers", "1", "--reset-timeout-s", "2")
    idle = [_ws(server.url) for _ in range(4)]  # four sessions that never reset hold every slot
    try:
        fifth = gym.make("rubricgym/Remote-v0", url=server.url, env_id=ENV_ID, timeout_s=60)
        started, deadline = time.monotonic(), time.monotonic() + 30
        while True:
            try:
                fifth.reset(seed=0)
                break
            except RemoteEnvError as exc:
                assert "CAPACITY_REACHED" in str(exc)
                assert time.monotonic() < deadline, "the idle sessions were never reclaimed"
                time.sleep(0.3)
        assert time.monotonic() - started < 20  # seconds, not the 600 s idle time-out
        reasons = [json.loads(ws.recv(timeout=10))["data"]["message"] for ws in idle]
        assert all("no reset within 2 s of connecting" in r for r in reasons), reasons
        fifth.close()
    finally:
        for ws in idle:
            ws.close()
        server.stop()


def test_half_open_connections_are_bounded_and_timed_out():
    server = start_server(ENV_ID, "--max-sessions", "1", "--workers", "1", "--max-connections", "8",
                          "--request-timeout-s", "2")
    sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(40)]
    try:  # connected, sending nothing: past the bound each is answered 503 and closed at once
        answers = []
        for s in sockets:
            s.settimeout(6)
            try:
                answers.append(s.recv(4096))
            except TimeoutError:
                answers.append(None)
        refused = sum(a is not None and a.startswith(b"HTTP/1.1 503") for a in answers)
        timed_out = sum(a == b"" for a in answers)  # within the bound: closed after 2 s without a request
        assert refused >= 40 - 8 and refused + timed_out == 40, answers
    finally:
        for s in sockets:
            s.close()
    try:
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200  # and it serves again
    finally:
        server.stop()
