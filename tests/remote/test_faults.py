"""Faults of a served env: a server killed mid-episode, malformed, oversized and unknown
messages, a client that vanishes, an idle session, a client and server that disagree.
Every wait is bounded; the server keeps serving the other sessions."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import gymnasium as gym
import pytest
from remote.conftest import start_server

import rubricgym  # noqa: F401  (registers the env ids)

pytestmark = pytest.mark.slow  # each test starts a real server and its session worker

ENV_ID = "SearchQA-Rubric-v0"  # the cheapest real engine to start (bundled corpus, BM25)


@pytest.fixture(autouse=True)
def _searchqa_installed():
    from requirements_guard import need

    need("bm25s", "pip install 'rubricgym[searchqa]'")


def _remote(url: str, **kw):
    return gym.make("rubricgym/Remote-v0", url=url, env_id=ENV_ID, **kw)


def _ws(url: str):
    from websockets.sync.client import connect

    return connect(url.replace("http://", "ws://") + "/ws", open_timeout=10, close_timeout=2)


def _ask(ws, message: str | bytes) -> dict:
    ws.send(message)
    return json.loads(ws.recv(timeout=60))


def test_killed_server_mid_episode_is_a_labelled_failure_then_a_restart_serves(serve):
    server = serve(ENV_ID, "--max-sessions", "2", "--workers", "1")
    env = _remote(server.url, timeout_s=20)
    env.reset(seed=0)
    *_, info = env.step("<search>river town</search>")
    assert "transition" in info and not info.get("environment_failure")
    server.kill()
    t0 = time.monotonic()
    obs, reward, terminated, truncated, info = env.step("<search>second hop</search>")
    assert time.monotonic() - t0 < 25  # bounded by the client's time-out, never a hang
    assert truncated and not terminated and reward == 0.0
    assert info["environment_failure"] is True and info["error"].startswith("EngineFailure: remote env server")
    assert info["transition"].truncated and info["transition"].error == info["error"]
    assert env.unwrapped.trajectory.transitions[-1].error == info["error"]  # the trajectory says so too
    with pytest.raises(gym.error.ResetNeeded):
        env.step("<search>again</search>")
    restarted = start_server(ENV_ID, "--max-sessions", "2", "--workers", "1", port=server.port)
    try:
        obs, info = env.reset(seed=1)  # a new session on the restarted server
        *_, info = env.step("<search>river town</search>")
        assert "transition" in info and not info.get("environment_failure")
    finally:
        env.close()
        restarted.stop()


def test_bad_messages_get_error_replies_and_the_server_keeps_serving(serve):
    from rubricgym.remote.wire import PROTOCOL

    server = serve(ENV_ID, "--max-sessions", "3", "--workers", "1", "--max-message-bytes", "4096")
    other = _remote(server.url, timeout_s=60)
    other.reset(seed=0)
    with _ws(server.url) as ws:
        assert _ask(ws, "{not json")["data"]["code"] == "INVALID_JSON"
        assert _ask(ws, json.dumps({"type": "teleport"}))["data"]["code"] == "UNKNOWN_TYPE"
        too_big = _ask(ws, json.dumps({"type": "step", "data": {"action": "x" * 10_000}}))
        assert too_big["type"] == "error" and "over this server's limit of 4096 bytes" in too_big["data"]["message"]
        assert "binary frames" in _ask(ws, b"\x00\x01")["data"]["message"]
        assert "send a reset first" in _ask(ws, json.dumps({"type": "step", "data": {"action": "<search>a</search>"}}))["data"]["message"]
        assert _ask(ws, json.dumps({"type": "step", "data": {"act": 1}}))["data"]["code"] == "VALIDATION_ERROR"
        assert "lucky" in _ask(ws, json.dumps({"type": "reset", "data": {"lucky": 7}}))["data"]["message"]
        wrong = {"protocol": "rubricgym-remote/0", "schema_digest": "0" * 16, "env_id": ENV_ID}
        assert "handshake refused" in _ask(ws, json.dumps({"type": "reset", "data": {"handshake": wrong}}))["data"]["message"]
        other_env = {"protocol": PROTOCOL, "schema_digest": _digest(), "env_id": "Other-v0"}
        assert "serves 'SearchQA-Rubric-v0'" in _ask(ws, json.dumps({"type": "reset", "data": {"handshake": other_env}}))["data"]["message"]
        ok = _ask(ws, json.dumps({"type": "reset", "data": {"seed": 0}}))  # the same session still works
        assert ok["type"] == "observation" and ok["data"]["observation"]["text"]
    *_, info = other.step("<search>river town</search>")  # and so does everyone else's
    assert "transition" in info and not info.get("environment_failure")
    other.close()


def _digest() -> str:
    from rubricgym.remote.wire import schema_digest

    return schema_digest()


@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")
def test_a_vanished_client_frees_its_session_and_an_idle_one_is_closed(serve):
    from rubricgym.remote.client import RemoteEnvError

    server = serve(ENV_ID, "--max-sessions", "1", "--workers", "1", "--idle-timeout-s", "3")
    ws = _ws(server.url)
    assert _ask(ws, json.dumps({"type": "reset", "data": {"seed": 0}}))["type"] == "observation"
    blocked = _remote(server.url, timeout_s=30)
    with pytest.raises(RemoteEnvError, match="CAPACITY_REACHED"):  # the one session is held
        blocked.reset(seed=0)
    ws.socket.close()  # the client vanishes: no close frame, no goodbye
    deadline = time.monotonic() + 30
    while True:
        try:
            blocked.reset(seed=0)
            break
        except RemoteEnvError:
            assert time.monotonic() < deadline, "the vanished client's session was never freed"
            time.sleep(0.5)
    time.sleep(4.5)  # idle past --idle-timeout-s 3: the server closes the session
    obs, reward, terminated, truncated, info = blocked.step("<search>river town</search>")
    assert truncated and info["environment_failure"] is True and "idle" in info["error"]
    blocked.reset(seed=0)  # a new session: the idle one was given back
    blocked.close()


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (its session workers), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def test_a_dead_session_worker_ends_its_episode_labelled_and_is_replaced(serve):
    server = serve(ENV_ID, "--max-sessions", "2", "--workers", "1")
    env = _remote(server.url, timeout_s=60)
    env.reset(seed=0)
    env.step("<search>river town</search>")
    workers = [p for p in _children(server.proc.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(workers) == 1, workers  # --workers 1
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    obs, reward, terminated, truncated, info = env.step("<search>second hop</search>")
    assert truncated and not terminated and info["environment_failure"] is True
    assert info["error"].startswith("EngineFailure: env worker died"), info["error"]
    env.reset(seed=0)  # the replaced worker serves a new episode
    *_, info = env.step("<search>river town</search>")
    assert "transition" in info and not info.get("environment_failure")
    env.close()


def test_a_hung_server_is_a_labelled_failure_after_the_time_out(serve):
    from rubricgym.remote.client import RemoteEnvError

    server = serve(ENV_ID, "--max-sessions", "1", "--workers", "1")
    warm = _remote(server.url, timeout_s=120)
    warm.reset(seed=0)  # the one slot's env is made (slow on a loaded machine); the next session reuses it
    warm.close()
    env = _remote(server.url, timeout_s=3)
    deadline = time.monotonic() + 30
    while True:
        try:
            env.reset(seed=0)
            break
        except RemoteEnvError:  # the closed session may still hold the slot for a moment
            assert time.monotonic() < deadline
            time.sleep(0.3)
    os.killpg(server.proc.pid, signal.SIGSTOP)  # the server and its worker stop answering, sockets stay open
    try:
        t0 = time.monotonic()
        obs, reward, terminated, truncated, info = env.step("<search>river town</search>")
        waited = time.monotonic() - t0
    finally:
        os.killpg(server.proc.pid, signal.SIGCONT)
    assert 2.5 < waited < 15, waited  # the client's time-out, not a hang
    assert truncated and info["environment_failure"] is True and "TimeoutError" in info["error"], info["error"]
    env.close()
