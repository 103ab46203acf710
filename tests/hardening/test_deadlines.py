"""Issue 28, item 4: a time-out bounds the whole call, not each read. A server on 127.0.0.1
that drips one byte every half second (in the headers, or in the body) is given up on once
the call's deadline passes; what it managed to send shows the call did not wait for it."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from rubricgym.bounded_http import bounded_http_client, total_seconds
from rubricgym.judges import JudgeSettings
from rubricgym.judges.client import ChatRequest, JudgeTransportError, OpenAIChatBackend
from rubricgym.models import build_tiny_model
from rubricgym.trainers.config import GenerationSettings
from rubricgym.trainers.generation_server import OpenAIServerGenerator, ServerGenerationError

DRIP_S = 0.5
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 200
BODY_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"


class DripServer:
    """Answers every connection with ``prefix`` at once, then one byte of ``drip`` every
    ``DRIP_S`` seconds; counts the dripped bytes the client took before it hung up."""

    def __init__(self, prefix: bytes, drip: bytes):
        self.prefix, self.drip, self.dripped, self.connections = prefix, drip, 0, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(self.prefix)
                for byte in self.drip:
                    time.sleep(DRIP_S)
                    conn.sendall(bytes([byte]))
                    self.dripped += 1
            except OSError:
                return  # the client hung up

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=["headers", "body"])
def drip_server(request):
    server = DripServer(b"", HEADERS) if request.param == "headers" else DripServer(BODY_HEAD, b"{" + b" " * 399)
    yield server
    server.close()


@pytest.mark.timeout(60)
def test_a_dripping_server_is_given_up_on_at_the_calls_deadline(drip_server):
    with bounded_http_client(timeout=2.0) as client, pytest.raises(httpx.ReadTimeout):
        client.get(drip_server.url + "/")
    time.sleep(2 * DRIP_S)  # the server notices the hang-up at its next byte
    assert drip_server.dripped < 10  # 2 s of a 100 s drip: it never waited per byte


@pytest.mark.timeout(60)
def test_the_judge_gives_up_at_its_timeout_on_every_attempt(drip_server):
    settings = JudgeSettings(base_url=drip_server.url + "/v1", model="m", timeout_s=2.0, max_transport_retries=1,
                             backoff_initial_s=0.1, backoff_max_s=0.1)
    request = ChatRequest(phase="score", messages=[{"role": "user", "content": "hi"}], schema_name="s",
                          json_schema={"type": "object"}, max_tokens=8)
    with pytest.raises(JudgeTransportError):
        OpenAIChatBackend(settings).complete(request)
    time.sleep(2 * DRIP_S)
    assert drip_server.connections == 2 and drip_server.dripped < 20  # two bounded attempts


@pytest.mark.timeout(60)
def test_the_generation_server_client_gives_up_at_its_timeout(drip_server):
    _, tok = build_tiny_model(0)
    settings = GenerationSettings(backend="openai", server_url=drip_server.url + "/v1", server_timeout_s=2.0)
    generator = OpenAIServerGenerator(tok, settings)
    with pytest.raises(ServerGenerationError, match="ReadTimeout"):
        generator.generate([[1, 2]])
    generator.close()
    time.sleep(2 * DRIP_S)
    assert drip_server.dripped < 10


def test_a_timeout_setting_stands_for_the_whole_call():
    assert total_seconds(5.0) == 5.0 and total_seconds(None) is None
    assert total_seconds(httpx.Timeout(3.0, connect=10.0)) == 10.0
