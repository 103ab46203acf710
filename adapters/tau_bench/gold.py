"""The gold end state's database hashes, computed once per (domain, start state, gold calls).

For every evaluation tau2's ``EnvironmentEvaluator`` builds a *gold* environment: a fresh
database, the task's start state, the task's gold tool calls replayed, then both databases
hashed with tau2's sorted hash (about 80 ms for retail). All of it is a function of the task, so
a group's other rollouts, and every later evaluation of the task, redo the same work.

The evaluator builds the gold environment with ``constructor()`` (no arguments) and the
predicted one with ``constructor(solo_mode=...)``. The no-argument call gets a
``GoldEnvironment``: it records ``set_state`` and ``make_tool_call`` and answers
``get_db_hash`` / ``get_user_db_hash`` from a cache keyed by what it recorded. On a miss, and for
anything else it is asked, it builds the real environment from the record (each failing gold call
caught and logged, as tau2's loop does) and delegates, so what the evaluator sees is tau2's.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from loguru import logger
from pydantic_core import to_jsonable_python

from tau2.environment.environment import Environment

#: (agent DB hash, user DB hash) of a gold environment
GoldHashes = tuple[str | None, str | None]


class GoldHashCache:
    """Gold hashes by the fingerprint of the calls that built them (bounded, least recently
    used dropped first); ``builds`` counts the real environments built on misses."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self.builds = 0
        self._hashes: OrderedDict[str, GoldHashes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> GoldHashes | None:
        with self._lock:
            found = self._hashes.get(key)
            if found is not None:
                self._hashes.move_to_end(key)
            return found

    def clear(self) -> None:
        """Forget every gold hash (the next evaluation of any task builds its gold again)."""
        with self._lock:
            self._hashes.clear()

    def put(self, key: str, hashes: GoldHashes) -> None:
        with self._lock:
            self.builds += 1
            self._hashes[key] = hashes
            self._hashes.move_to_end(key)
            while len(self._hashes) > self.capacity:
                self._hashes.popitem(last=False)


class GoldEnvironment:
    """What tau2's evaluator gets as its gold environment (see the module docstring)."""

    def __init__(self, build: Callable[[], Environment], cache: GoldHashCache):
        self._build, self._cache = build, cache
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._real: Environment | None = None

    def set_state(self, initialization_data: Any, initialization_actions: Any, message_history: Any) -> None:
        self._record("set_state", {"initialization_data": initialization_data,
                                   "initialization_actions": initialization_actions,
                                   "message_history": message_history})

    def make_tool_call(self, tool_name: str, requestor: str = "assistant", **arguments: Any) -> Any:
        # tau2's gold loop ignores the result; a recorded call's errors surface when the state is built
        return self._record("make_tool_call", {"tool_name": tool_name, "requestor": requestor, **arguments})

    def get_db_hash(self) -> str | None:
        return self._hashes()[0]

    def get_user_db_hash(self) -> str | None:
        return self._hashes()[1]

    def __getattr__(self, name: str) -> Any:  # anything else: the real environment's
        return getattr(self.real(), name)

    def real(self) -> Environment:
        """The real gold environment, built from the recorded calls (once)."""
        if self._real is None:
            env = self._build()
            for kind, kwargs in self._calls:
                if kind == "set_state":
                    env.set_state(**kwargs)
                    continue
                try:
                    env.make_tool_call(**kwargs)
                except Exception as exc:  # noqa: BLE001 - as tau2's gold loop: logged, replay goes on
                    logger.warning(f"Error in golden actions {kwargs['tool_name']}({kwargs}): {exc}")
            self._real = env
        return self._real

    def _record(self, kind: str, kwargs: dict[str, Any]) -> Any:
        """Kept for the fingerprint until the real environment exists; then passed on to it."""
        if self._real is not None:
            return getattr(self._real, kind)(**kwargs)
        self._calls.append((kind, kwargs))
        return None

    def _key(self) -> str:
        text = json.dumps(to_jsonable_python(self._calls, fallback=repr), sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()

    def _hashes(self) -> GoldHashes:
        if self._real is not None:
            return self._real.get_db_hash(), self._real.get_user_db_hash()
        key = self._key()
        found = self._cache.get(key)
        if found is None:
            env = self.real()
            found = (env.get_db_hash(), env.get_user_db_hash())
            self._cache.put(key, found)
        return found
