"""Client for a Search-R1 style retrieval server (e.g. a dense retriever over Wikipedia).

Protocol: ``POST {url}/retrieve`` with ``{"queries": [q], "topk": k, "return_scores": true}``
-> ``{"result": [[{"document": {"id", "contents"}, "score"}, ...]]}``. Connection errors,
time-outs and 5xx answers are retried with exponential back-off; when every attempt fails
``RetrievalUnavailable`` says which server, what failed and how often, within a bounded time
(``attempts * timeout`` plus back-off).
"""

from __future__ import annotations

from typing import Any

import httpx
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from rubricgym.adapters.searchqa.data import Passage
from rubricgym.adapters.searchqa.engine import MAX_QUERY_CHARS, Hit
from rubricgym.bounded_http import DEFAULT_MAX_REPLY_BYTES, ReplyTooLarge, bounded_http_client


class RetrievalUnavailable(RuntimeError):
    """The retrieval server is down, hangs, or answers with something unusable."""


class _Transient(Exception):
    """A failure worth retrying (5xx); the message says what happened."""


class HTTPRetriever:
    """Search-R1 ``/retrieve`` client; ``document`` knows only passages it has returned."""

    def __init__(self, url: str, timeout: float = 10.0, attempts: int = 3, backoff: float = 0.5,
                 path: str = "/retrieve", max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retrieval server url must start with http:// or https://, got {url!r}")
        if attempts < 1 or timeout <= 0:
            raise ValueError("attempts must be >= 1 and timeout > 0")
        self.url = url.rstrip("/") + path
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self._client = bounded_http_client(max_reply_bytes, httpx.Timeout(timeout), trust_env=False)
        self._seen: dict[str, dict[str, Passage]] = {}

    def _post(self, payload: dict[str, Any]) -> Any:
        try:
            response = self._client.post(self.url, json=payload)
        except httpx.TimeoutException as exc:
            raise _Transient(f"no answer within {self.timeout:g}s ({type(exc).__name__})") from exc
        except ReplyTooLarge as exc:  # the same server would send it again: not transient
            raise RetrievalUnavailable(f"{self.url}: {exc}") from exc
        except httpx.TransportError as exc:
            raise _Transient(f"cannot connect ({type(exc).__name__}: {exc})") from exc
        if response.status_code >= 500:
            raise _Transient(f"HTTP {response.status_code}: {response.text[:200]}")
        if response.status_code != 200:
            raise RetrievalUnavailable(f"{self.url} answered HTTP {response.status_code}: {response.text[:200]}")
        try:
            return response.json()
        except ValueError as exc:
            raise RetrievalUnavailable(f"{self.url} answered with non-JSON: {response.text[:200]!r}") from exc

    def search(self, query: str, k: int) -> list[Hit]:
        payload = {"queries": [query[:MAX_QUERY_CHARS]], "topk": int(k), "return_scores": True}
        retrying = Retrying(stop=stop_after_attempt(self.attempts), reraise=False,
                            wait=wait_exponential(multiplier=self.backoff, max=4 * self.backoff),
                            retry=retry_if_exception_type(_Transient))
        try:
            body = retrying(self._post, payload)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise RetrievalUnavailable(f"retrieval server {self.url} unavailable after {self.attempts} attempt(s): {last}") from exc
        return self._hits(body)

    def _hits(self, body: Any) -> list[Hit]:
        try:
            rows = body["result"][0]
            hits = []
            for row in rows:
                doc = row["document"] if "document" in row else row
                passage = Passage.from_contents(str(doc["id"]), str(doc["contents"]))
                hits.append(Hit(passage=passage, score=float(row.get("score", 0.0))))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise RetrievalUnavailable(f"{self.url} answered in an unknown shape ({type(exc).__name__}: {exc}): "
                                       f"{str(body)[:200]}") from exc
        for hit in hits:
            self._seen.setdefault(hit.passage.title, {})[hit.passage.id] = hit.passage
        return hits

    def document(self, title: str) -> list[Passage]:
        return list(self._seen.get(title, {}).values())

    def close(self) -> None:
        self._client.close()
