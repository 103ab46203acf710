"""The Search-R1 HTTP retrieval client against real local server processes: the bundled
server (same results as local bm25s, the oracle wins through it), a server that is down, one
that hangs, one that fails with 5xx. Failures are bounded (time-outs x attempts) and come
back as a labelled engine failure, never as the policy's fault."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import gymnasium as gym
import httpx
import pytest

from searchqa.support import respond
from rubricgym.adapters.searchqa.data import BUNDLED_CORPUS, load_corpus
from rubricgym.adapters.searchqa.engine import BM25Retriever
from rubricgym.adapters.searchqa.expert import expert_actions
from rubricgym.adapters.searchqa.http_client import HTTPRetriever, RetrievalUnavailable

HANGING = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
    print(s.getsockname()[1], flush=True)
    held = []
    while True:
        conn, _ = s.accept(); held.append(conn)   # read nothing, answer nothing
""")
FAILING = textwrap.dedent("""
    from http.server import BaseHTTPRequestHandler, HTTPServer
    class H(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(503); self.send_header("Content-Length", "4"); self.end_headers(); self.wfile.write(b"busy")
        def log_message(self, *a): pass
    srv = HTTPServer(("127.0.0.1", 0), H); print(srv.server_address[1], flush=True); srv.serve_forever()
""")

FLOODING = textwrap.dedent("""
    import sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    DECLARED = sys.argv[1] == "declared"
    class H(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(256 << 20)) if DECLARED else self.send_header("Connection", "close")
            self.end_headers()
            try:
                for _ in range(4096):
                    self.wfile.write(b"[" * (64 << 10))   # 256 MiB of a reply, if anyone reads it
            except OSError:
                pass
        def log_message(self, *a): pass
    srv = HTTPServer(("127.0.0.1", 0), H); print(srv.server_address[1], flush=True); srv.serve_forever()
""")


def _spawn(args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-W", "ignore", *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        pytest.fail(f"server {args} did not start")
    port = line.rsplit(":", 1)[-1]
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def server():
    proc, url = _spawn(["-m", "rubricgym.adapters.searchqa.server", "--port", "0"])
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def spawn():
    procs = []

    def _run(code: str) -> str:
        proc, url = _spawn(["-c", code])
        procs.append(proc)
        return url

    yield _run
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_answers_like_local_bm25(server):
    local = BM25Retriever(load_corpus(BUNDLED_CORPUS))
    client = HTTPRetriever(server)
    for query in ("river town", "founded by", "born in 1923", "zzqx"):
        remote = client.search(query, 5)
        assert [(h.passage, round(h.score, 4)) for h in remote] == [(h.passage, round(h.score, 4)) for h in local.search(query, 5)]
    title = client.search("river town", 3)[0].passage.title
    assert client.document(title) and all(p.title == title for p in client.document(title))
    health = httpx.get(f"{server}/health", timeout=5, trust_env=False)
    assert health.json() == {"status": "ok"}
    raw = httpx.post(f"{server}/retrieve", json={"queries": ["river"], "topk": 2}, timeout=5, trust_env=False).json()
    assert set(raw["result"][0][0]) == {"id", "contents"}  # no scores unless asked (Search-R1's shape)
    client.close()


@pytest.mark.parametrize("body,match", [({"queries": "river", "topk": 2}, "queries"), ({"queries": ["a"], "topk": 0}, "topk")])
def test_bad_requests_are_client_errors_not_retried(server, body, match):
    response = httpx.post(f"{server}/retrieve", json=body, timeout=5, trust_env=False)
    assert response.status_code == 400 and match in response.json()["error"]
    client = HTTPRetriever(server, attempts=3)
    with pytest.raises(RetrievalUnavailable, match="HTTP 400"):
        client.search("x", 0)
    client.close()


@pytest.mark.parametrize("grammar", ["search-r1", "trca"])
def test_oracle_wins_through_the_server(server, grammar):
    env = gym.make("SearchQA-Rubric-Eval-v0", grammar=grammar, server_url=server)
    for task_id in env.unwrapped.adapter.task_ids()[:8]:
        env.reset(seed=0, options={"task_id": task_id})
        for action in expert_actions(env.unwrapped.adapter):
            *_, terminated, truncated, info = env.step(respond(action, grammar))
        assert terminated and info["env_reward"] == 1.0, task_id
    env.close()


def _assert_labelled_failure(url: str, match: str) -> None:
    env = gym.make("SearchQA-Rubric-v0", server_url=url, server_timeout=0.5, server_attempts=2)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<search>river town</search>")
    assert truncated and not terminated and info["environment_failure"] is True, info
    assert "retrieval failed" in info["error"] and match in info["error"], info["error"]
    assert "after 2 attempt(s)" in info["error"]
    assert info["transition"].error and not info["transition"].facts.rejected  # not the policy's fault
    assert obs.startswith("The environment failed")
    env.close()


@pytest.mark.timeout(60)
def test_server_down_is_a_labelled_engine_failure():
    _assert_labelled_failure(f"http://127.0.0.1:{_free_port()}", "cannot connect")


@pytest.mark.timeout(60)
def test_hanging_server_times_out_as_a_labelled_engine_failure(spawn):
    _assert_labelled_failure(spawn(HANGING), "no answer within 0.5s")


@pytest.mark.timeout(60)
def test_failing_server_is_retried_then_labelled(spawn):
    _assert_labelled_failure(spawn(FAILING), "HTTP 503")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["declared", "streamed"])
def test_flooding_server_is_refused_while_read(spawn, how):
    """A reply past max_reply_bytes is refused (by its Content-Length, or as soon as the
    body passes the limit), once, as an unavailable server: never held whole, not retried."""
    client = HTTPRetriever(spawn(FLOODING.replace("sys.argv[1]", repr(how))), attempts=3, max_reply_bytes=1 << 20)
    with pytest.raises(RetrievalUnavailable, match="bytes"):
        client.search("river town", 3)
    client.close()


def test_client_rejects_bad_settings():
    with pytest.raises(ValueError, match="http"):
        HTTPRetriever("localhost:8000")
    with pytest.raises(ValueError):
        HTTPRetriever("http://127.0.0.1:1", attempts=0)
