"""HTTP replies bounded in bytes while they are read.

Clients of servers we do not control (LLM judges, user simulators, retrieval servers) read
whole reply bodies (the openai client does); a hostile or broken server could make them
hold an unbounded body. ``BoundedReplyTransport`` refuses a declared ``Content-Length`` over
the limit and stops a body without one as soon as it passes the limit, raising
``ReplyTooLarge`` (an ``httpx.TransportError``) that callers classify and do not retry.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "BoundedReplyTransport", "ReplyTooLarge", "bounded_http_client"]

DEFAULT_MAX_REPLY_BYTES = 4 << 20


class ReplyTooLarge(httpx.TransportError):
    """The server's reply body went past ``max_reply_bytes``: refused while being read."""


class _BoundedBody(httpx.SyncByteStream):
    """A response body that stops being read, and raises, past ``limit`` bytes."""

    def __init__(self, inner: httpx.SyncByteStream, limit: int):
        self._inner, self._limit = inner, limit

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise ReplyTooLarge(f"the reply body exceeded {self._limit} bytes")
            yield chunk

    def close(self) -> None:
        self._inner.close()


class BoundedReplyTransport(httpx.HTTPTransport):
    """httpx transport whose replies are capped in bytes: a hostile or broken server cannot
    make the client hold an unbounded body (the openai client reads whole replies)."""

    def __init__(self, max_reply_bytes: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.max_reply_bytes = max_reply_bytes

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_reply_bytes:
            response.close()
            raise ReplyTooLarge(f"the reply declares {declared} bytes, over the limit of {self.max_reply_bytes}")
        body: httpx.SyncByteStream = response.stream  # type: ignore[assignment]  # always, from HTTPTransport
        return httpx.Response(status_code=response.status_code, headers=response.headers,
                              stream=_BoundedBody(body, self.max_reply_bytes),
                              extensions=response.extensions, request=request)


def bounded_http_client(max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, timeout: float | httpx.Timeout = 60.0,
                        **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` whose replies are capped at ``max_reply_bytes``."""
    return httpx.Client(transport=BoundedReplyTransport(max_reply_bytes), timeout=timeout, **kwargs)
