"""A real OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script.

Each ``/v1/chat/completions`` request gets the next reply of ``replies`` (the last one
repeats once the script runs out); every request body is kept for the test to inspect."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedLLM:
    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._send(200, json.dumps({"data": [{"id": "scripted"}]}).encode())

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.auth_headers.append(self.headers.get("Authorization", ""))
                    n = len(server.requests)
                    text = server.replies[min(n, len(server.replies)) - 1]
                prompt = sum(len(m.get("content", "")) for m in body.get("messages", []))
                reply = {"id": f"cmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": prompt // 4, "completion_tokens": len(text) // 4,
                                   "total_tokens": prompt // 4 + len(text) // 4}}
                self._send(200, json.dumps(reply).encode())

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
