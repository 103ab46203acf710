"""Judge-call accounting per phase and per training step: what the judge cost, what the
cache saved, and how many verdicts came back unusable. Holds no secrets by construction:
only counts and phase names go in."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from pathlib import Path

from rubricgym.atomic_files import atomic_write_text
from typing import Any

PHASES = ("propose", "extend", "merge", "score")
COUNTERS = (
    "calls",
    "cache_hits",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "cached_completion_tokens",
    "transport_failures",
    "invalid_answers",
    "repairs",
    "unanswered_calls",
    "unanswered_verdicts",
    "dropped_citations",
)


class Ledger:
    def __init__(self, price_prompt_per_mtok: float = 0.0, price_completion_per_mtok: float = 0.0):
        self.price_prompt = price_prompt_per_mtok
        self.price_completion = price_completion_per_mtok
        self._lock = threading.Lock()
        self._rows: dict[tuple[int | None, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTERS, 0))

    def add(self, phase: str, step: int | None = None, **counts: int) -> None:
        unknown = set(counts) - set(COUNTERS)
        if unknown:
            raise ValueError(f"unknown ledger counters {sorted(unknown)}")
        with self._lock:
            row = self._rows[(step, phase)]
            for name, value in counts.items():
                row[name] += int(value)

    def cost(self, row: dict[str, int]) -> float:
        return (row["prompt_tokens"] * self.price_prompt + row["completion_tokens"] * self.price_completion) / 1e6

    def _total(self, rows: list[dict[str, int]]) -> dict[str, Any]:
        total: dict[str, Any] = dict.fromkeys(COUNTERS, 0)
        for row in rows:
            for name in COUNTERS:
                total[name] += row[name]
        total["cost_usd"] = round(self.cost(total), 8)
        return total

    def totals(self, phase: str | None = None, step: int | None = None, any_step: bool = True) -> dict[str, Any]:
        with self._lock:
            rows = [
                dict(r)
                for (s, p), r in self._rows.items()
                if (phase is None or p == phase) and (any_step or s == step)
            ]
        return self._total(rows)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            items = [((s, p), dict(r)) for (s, p), r in self._rows.items()]
        phases = sorted({p for (_, p), _ in items}, key=lambda p: (PHASES.index(p) if p in PHASES else 99, p))
        steps = sorted({s for (s, _), _ in items if s is not None})
        return {
            "total": self._total([r for _, r in items]),
            "per_phase": {ph: self._total([r for (s, p), r in items if p == ph]) for ph in phases},
            "per_step": {
                str(st): {
                    "total": self._total([r for (s, p), r in items if s == st]),
                    "per_phase": {ph: self._total([r for (s, p), r in items if s == st and p == ph]) for ph in phases},
                }
                for st in steps
            },
            "prices_per_mtok": {"prompt": self.price_prompt, "completion": self.price_completion},
        }

    def write(self, path: str | Path) -> None:
        """Atomic: a crash mid-write leaves the previous ledger, never half a file."""
        atomic_write_text(path, json.dumps(self.summary(), indent=2, sort_keys=True))
