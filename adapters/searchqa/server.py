"""A small Search-R1 style retrieval server over a JSON-lines corpus (bm25s), on the standard
library's HTTP server: ``POST /retrieve`` as in ``http_client.py``, ``GET /health``.

    python -m rubricgym.adapters.searchqa.server --corpus corpus.jsonl --port 8000

``--port 0`` picks a free port; the first line printed is ``listening on http://HOST:PORT``.
It binds 127.0.0.1 unless told otherwise. Useful for tests and for pointing several trainer
processes at one index.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rubricgym.adapters.searchqa.data import BUNDLED_CORPUS
from rubricgym.adapters.searchqa.engine import BM25Retriever, Retriever, bm25_for_file

MAX_BODY = 1 << 20
MAX_QUERIES = 256
MAX_TOPK = 100


def handle_retrieve(retriever: Retriever, body: Any) -> dict[str, Any]:
    """The ``/retrieve`` answer for a decoded request body; ``ValueError`` for bad requests."""
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    queries = body.get("queries")
    if queries is None and isinstance(body.get("query"), str):  # verl-agent's single-query variant
        queries = [body["query"]]
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries) or len(queries) > MAX_QUERIES:
        raise ValueError(f"'queries' must be a list of at most {MAX_QUERIES} strings")
    topk = body.get("topk", 3)
    if not isinstance(topk, int) or not 0 < topk <= MAX_TOPK:
        raise ValueError(f"'topk' must be an integer in 1..{MAX_TOPK}")
    scores = bool(body.get("return_scores", False))
    result = []
    for q in queries:
        hits = retriever.search(q, topk)
        docs = [{"document": {"id": h.passage.id, "contents": h.passage.contents}, **({"score": h.score} if scores else {})}
                for h in hits]
        result.append(docs if scores else [d["document"] for d in docs])
    return {"result": result}


def make_server(retriever: Retriever, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/retrieve":
                self._send(404, {"error": f"no route {self.path}"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                self._send(400, {"error": f"body must be 1..{MAX_BODY} bytes"})
                return
            try:
                self._send(200, handle_retrieve(retriever, json.loads(self.rfile.read(length))))
            except ValueError as exc:  # JSON errors are ValueErrors too
                self._send(400, {"error": str(exc)})

        def log_message(self, format: str, *args: Any) -> None:  # quiet by default
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(BUNDLED_CORPUS), help="JSON-lines corpus (default: the bundled one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    retriever: BM25Retriever = bm25_for_file(args.corpus)
    server = make_server(retriever, args.host, args.port)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
