"""Bounded connections for ``rubricgym serve-env``: uvicorn's own HTTP protocol, counting.

uvicorn checks its connection limit only once a request has arrived, so connections that
never send one (half-open, slow) pile up without bound. ``bounded_http_protocol`` closes a
connection past ``max_connections`` at once (with a 503), and one that has not begun a request
within ``request_timeout_s`` of connecting.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["REFUSED", "bounded_http_protocol"]

REFUSED = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def bounded_http_protocol(max_connections: int, request_timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a bound on open connections (WebSocket sessions included)
    and a deadline for the first request."""

    class BoundedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._first_request: asyncio.TimerHandle | None = None
            if len(self.connections) > max_connections:
                transport.write(REFUSED)
                transport.close()
                return
            self._first_request = self.loop.call_later(request_timeout_s, self._no_request)

        def _no_request(self) -> None:
            if self.cycle is None and self.transport.get_protocol() is self and not self.transport.is_closing():
                self.transport.close()  # never began a request: a half-open or stalled client

        def connection_lost(self, exc: Exception | None) -> None:
            if self._first_request is not None:
                self._first_request.cancel()
            super().connection_lost(exc)

    return BoundedH11Protocol
