"""HTTP client for AppWorld's environment server, with a bound on every call.

Any transport problem (refused connection, dropped connection, timeout, non-200 answer)
becomes ``ServerCallError`` with ``hung`` set when the server stopped answering in time.
"""

from __future__ import annotations

from typing import Any

import httpx


class ServerCallError(RuntimeError):
    def __init__(self, message: str, hung: bool = False):
        super().__init__(message)
        self.hung = hung


class EnvironmentClient:
    """Calls ``/initialize``, ``/execute``, ``/task_completed``, ``/evaluate``, ``/close``."""

    def __init__(self, url: str, call_timeout_s: float):
        self.url = url
        self.call_timeout_s = call_timeout_s
        self._http = httpx.Client(base_url=url, timeout=call_timeout_s, trust_env=False)

    def call(self, method: str, timeout_s: float | None = None, **payload: Any) -> Any:
        try:
            response = self._http.post("/" + method, json=payload, timeout=timeout_s or self.call_timeout_s)
        except httpx.TimeoutException as exc:
            raise ServerCallError(f"AppWorld server did not answer /{method} within "
                                  f"{timeout_s or self.call_timeout_s:.0f} s", hung=True) from exc
        except httpx.HTTPError as exc:
            raise ServerCallError(f"AppWorld server unreachable on /{method}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise ServerCallError(f"AppWorld server /{method} answered {response.status_code}: {response.text[:500]}")
        try:
            return response.json()["output"]
        except (ValueError, KeyError) as exc:
            raise ServerCallError(f"AppWorld server /{method} sent a malformed answer: {response.text[:200]}") from exc

    def close(self) -> None:
        self._http.close()
