"""HTTP calls bounded in bytes and in time while they are read.

Clients of servers we do not control (LLM judges, user simulators, retrieval servers,
generation servers) read whole reply bodies (the openai client does); a hostile or broken
server could make them hold an unbounded body, or hold the call open forever by sending a
byte now and then (httpx's timeouts bound each read, not the call). ``BoundedReplyTransport``
refuses a declared ``Content-Length`` over the limit and stops a body without one as soon as
it passes the limit (``ReplyTooLarge``), and gives every request a total deadline: each
socket operation (connect, send, every read of the headers and the body) may take only what
is left of it, and past it the call ends with ``httpx.ReadTimeout``. Both are
``httpx.TransportError``s that callers already classify.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "BoundedReplyTransport", "ReplyTooLarge", "bounded_http_client", "total_seconds"]

DEFAULT_MAX_REPLY_BYTES = 4 << 20


class ReplyTooLarge(httpx.TransportError):
    """The server's reply body went past ``max_reply_bytes``: refused while being read."""


_DEADLINE = threading.local()  # the monotonic time the current thread's call must end by


def _left(timeout: float | None) -> float | None:
    """``timeout`` cut to what is left of this thread's call deadline (none set: unchanged)."""
    end = getattr(_DEADLINE, "end", None)
    if end is None or end == float("inf"):
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the call's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every operation waits at most what is left of the deadline."""

    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own socket backend, with the deadline applied to every operation."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _left(timeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _left(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _BoundedBody(httpx.SyncByteStream):
    """A response body that stops being read, and raises, past ``limit`` bytes or past the
    call's deadline ``end`` (monotonic seconds)."""

    def __init__(self, inner: httpx.SyncByteStream, limit: int, end: float):
        self._inner, self._limit, self._end = inner, limit, end

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        outer, _DEADLINE.end = getattr(_DEADLINE, "end", None), self._end  # the body is read after handle_request
        try:  # httpx's own stream turns the deadline's httpcore.ReadTimeout into httpx.ReadTimeout
            for chunk in self._inner:
                read += len(chunk)
                if read > self._limit:
                    raise ReplyTooLarge(f"the reply body exceeded {self._limit} bytes")
                yield chunk
        finally:
            _DEADLINE.end = outer

    def close(self) -> None:
        self._inner.close()


class BoundedReplyTransport(httpx.HTTPTransport):
    """httpx transport whose replies are capped in bytes and whose calls have a total deadline
    (``total_s``): a hostile or broken server can neither make the client hold an unbounded
    body (the openai client reads whole replies) nor hold a call open past the deadline."""

    def __init__(self, max_reply_bytes: int, total_s: float | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.max_reply_bytes = max_reply_bytes
        self.total_s = total_s
        self._pool._network_backend = _DeadlineBackend()  # httpcore's pool has no public setter for it

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        end = time.monotonic() + self.total_s if self.total_s else float("inf")
        outer, _DEADLINE.end = getattr(_DEADLINE, "end", None), end
        try:
            response = super().handle_request(request)
        finally:
            _DEADLINE.end = outer
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_reply_bytes:
            response.close()
            raise ReplyTooLarge(f"the reply declares {declared} bytes, over the limit of {self.max_reply_bytes}")
        body: httpx.SyncByteStream = response.stream  # type: ignore[assignment]  # always, from HTTPTransport
        return httpx.Response(status_code=response.status_code, headers=response.headers,
                              stream=_BoundedBody(body, self.max_reply_bytes, end),
                              extensions=response.extensions, request=request)


def total_seconds(timeout: float | httpx.Timeout | None) -> float | None:
    """The total deadline a timeout setting stands for: the number itself, or the longest of
    an ``httpx.Timeout``'s parts (a user's ``--timeout 5`` bounds the whole call)."""
    if timeout is None or isinstance(timeout, (int, float)):
        return timeout
    parts = [t for t in (timeout.connect, timeout.read, timeout.write, timeout.pool) if t is not None]
    return max(parts) if parts else None


def bounded_http_client(max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES, timeout: float | httpx.Timeout = 60.0,
                        total_s: float | None = None, **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` whose replies are capped at ``max_reply_bytes`` and whose every
    request ends within ``total_s`` (default: the timeout, as a total for the whole call)."""
    transport = BoundedReplyTransport(max_reply_bytes, total_s if total_s is not None else total_seconds(timeout))
    return httpx.Client(transport=transport, timeout=timeout, **kwargs)
