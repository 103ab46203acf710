"""Real HTTP servers on 127.0.0.1 for the judge tests.

``ScriptedJudgeServer``: an OpenAI-compatible ``/v1/chat/completions`` endpoint that
answers from the request's own JSON schema with a fixed rule (a deterministic "judge"),
or misbehaves on purpose: HTTP 500 / 429, hanging past the client's timeout, malformed
JSON content, a non-JSON body, an answer that repeats the key it was sent. It records
every request (body and auth header) and the peak number of requests in flight.

``LlamaServer``: the real llama-cpp-python server process with the SmolLM2 GGUF.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rubricgym.llm_server import LocalLLMServer

REPO = Path(__file__).resolve().parents[2]
LLAMA_PYTHON = REPO / ".venvs" / "llama" / "bin" / "python"


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    return fmt.get("schema")


def scripted_answer(body: dict[str, Any]) -> str:
    """Criteria phases: two criteria named after the phase. Score: 'fail' for criteria whose
    id ends in an even digit, else 'pass'; cite steps 0 and 99 (99 never exists)."""
    schema = _schema_of(body)
    if schema is None:
        return "{}"
    props = schema.get("properties", {})
    if "criteria" in props:
        user = body["messages"][-1]["content"]
        phase = user.split("\n", 1)[0].replace("PHASE: ", "").rstrip(".")
        n = len(body["messages"])
        return json.dumps({"criteria": [{"text": f"{phase} criterion A{n}"}, {"text": f"{phase} criterion B"}]})
    answer = {}
    for i, cid in enumerate(props):
        verdict = "fail" if cid[-1].isdigit() and int(cid[-1]) % 2 == 0 else "pass"
        item = {"verdict": verdict, "steps": [0, 99]}
        if "reason" in props[cid].get("properties", {}):
            item = {"reason": "scripted", **item}
        answer[cid] = item
    return json.dumps(answer)


class ScriptedJudgeServer:
    def __init__(self, mode: str = "ok", delay_s: float = 0.0, hang_s: float = 60.0):
        self.mode = mode
        self.delay_s = delay_s
        self.hang_s = hang_s
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self.plan: list[str] = []  # per-request modes consumed first, then ``mode``
        self.reply_text = ""  # the content of every "text" mode reply
        self.answer: Callable[[dict[str, Any]], str] = scripted_answer  # the reply of "ok" requests
        self.messages: list[dict[str, Any]] = []  # "message" mode: assistant messages sent in turn
        self.mode_for: Callable[[dict[str, Any]], str] | None = None  # a request's mode from its body
        self.in_flight = 0
        self.peak_in_flight = 0
        self.bytes_flooded: list[int] = []  # per flooding reply: bytes written before the client hung up
        self.drip_s = 0.5  # "drip" mode: seconds between bytes
        self.bytes_dripped: list[int] = []  # per dripping reply: bytes the client took before it hung up
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, code: int, payload: bytes, headers: dict[str, str] | None = None,
                      ctype: str = "application/json") -> None:
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._send(200, json.dumps({"data": [{"id": "scripted"}]}).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.auth_headers.append(self.headers.get("Authorization", ""))
                    mode = server.plan.pop(0) if server.plan else (server.mode_for(body) if server.mode_for else server.mode)
                    server.in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    self._respond(mode, body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _flood(self, declared: bool, total: int = 256 << 20) -> None:
                """Up to 256 MiB of a JSON string, with or without a Content-Length, until
                the client hangs up; records how much was written."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if declared:
                    self.send_header("Content-Length", str(total))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                chunk = b"x" * (64 << 10)
                self._write_body(itertools.chain([b'{"id": "'], itertools.repeat(chunk, total // len(chunk))),
                                 server.bytes_flooded)

            def _drip(self, payload: bytes) -> None:
                """A slow-loris reply: every read the client makes gets a byte in time, so only a
                deadline on the whole call ends it; counts the bytes it took."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self._write_body((payload[i:i + 1] for i in range(len(payload))), server.bytes_dripped,
                                 pause_s=server.drip_s)

            def _write_body(self, pieces: Iterable[bytes], tally: list[int], pause_s: float = 0.0) -> None:
                """Writes ``pieces`` (a pause before each) until done, the client hangs up or the
                server stops; the bytes written go to ``tally``."""
                sent = 0
                try:
                    for piece in pieces:
                        if pause_s and server._stop.wait(pause_s):
                            break
                        self.wfile.write(piece)
                        self.wfile.flush()
                        sent += len(piece)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server._lock:
                        tally.append(sent)
                    self.close_connection = True

            def _respond(self, mode: str, body: dict[str, Any]) -> None:
                if mode == "500":
                    return self._send(500, b'{"error": {"message": "internal error"}}')
                if mode == "429":
                    return self._send(429, b'{"error": {"message": "rate limited"}}')
                if mode == "429_retry_after":  # asks for a 1 s pause
                    return self._send(429, b'{"error": {"message": "rate limited"}}', {"Retry-After": "1"})
                if mode == "hang":
                    server._stop.wait(server.hang_s)
                    return
                if mode == "drip":  # a valid reply's headers, then its body one byte every drip_s seconds
                    return self._drip(json.dumps({"choices": [{"index": 0, "message": {
                        "role": "assistant", "content": server.answer(body) + " " * 4096}}]}).encode())
                if mode == "bad_body":
                    return self._send(200, b"<html>not json</html>", ctype="text/html")
                if mode in ("huge_declared", "huge_streamed"):  # a body far past any sane reply
                    return self._flood(declared=mode == "huge_declared")
                message: dict[str, Any] = {}
                if mode == "message":  # the next scripted assistant message (function calls included)
                    with server._lock:
                        message = server.messages.pop(0) if server.messages else {"content": server.reply_text}
                    text = message.get("content") or ""
                elif mode == "text":  # a fixed (hostile) reply, e.g. deeply nested JSON
                    text = server.reply_text
                else:
                    text = "this is {not json" if mode == "malformed" else server.answer(body)
                if mode == "echo_key":  # repeats the key it was sent, before the answer and as each reason
                    key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    text = f"You sent the key {key}. " + text.replace('"scripted"', json.dumps(f"key {key}"))
                prompt_chars = sum(len(m.get("content", "")) for m in body.get("messages", []))
                reply = {
                    "id": f"cmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "message": {"role": "assistant", **message, "content": text},
                                 "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {
                        "prompt_tokens": prompt_chars // 4,
                        "completion_tokens": len(text) // 4,
                        "total_tokens": prompt_chars // 4 + len(text) // 4,
                    },
                }
                self._send(200, json.dumps(reply).encode())

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def count(self, predicate: Callable[[dict[str, Any]], bool] | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if predicate is None or predicate(r))

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def start_llama_server(n_ctx: int = 4096, threads: int = 2) -> LocalLLMServer:
    """The packaged SmolLM2 behind llama.cpp on 127.0.0.1, started (rubricgym.llm_server)."""
    return LocalLLMServer(n_ctx=n_ctx, threads=threads, python=LLAMA_PYTHON, start_timeout_s=120.0).start()


if __name__ == "__main__":  # manual: python tests/judges/judge_test_servers.py  (prints a llama server URL)
    srv = start_llama_server()
    print(srv.base_url, file=sys.stderr)
    try:
        time.sleep(3600)
    finally:
        srv.stop()
