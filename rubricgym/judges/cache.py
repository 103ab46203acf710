"""Persistent judge-response cache: a re-run (or a restarted trainer) never pays twice.

Keyed by a SHA-256 over the whole request as the server sees it (model, messages, decoding
parameters, response format, schema) - never the API key or the server address, so the
same request to a restarted server on another port still hits. SQLite gives atomic,
crash-safe writes and lets several processes share one cache directory.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from rubricgym.secret_refs import redact_json

CACHE_FILE = "judge_cache.sqlite"


def request_key(payload: dict[str, Any]) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """key -> stored reply (a JSON object). Thread-safe; safe to share across processes."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / CACHE_FILE
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
        )

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError:  # a damaged row is a miss, not a crash
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` with every key this process has read redacted (a server may echo it)."""
        blob = json.dumps(redact_json(value), ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO replies (key, value, created) VALUES (?, ?, ?)", (key, blob, time.time())
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
