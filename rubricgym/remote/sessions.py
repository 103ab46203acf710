"""The envs behind ``rubricgym serve-env``: one env per session, hosted in worker processes.

Sessions never run as threads of the server: the engines change process-wide state (random
generators, working directory, environment variables). Session slot k lives in worker k mod N,
a spawned process answering JSON over a pipe (``rubricgym.json_worker``, which the trainer's
env workers are built on too).
A worker answers one request at a time, so no two engines ever step at once in one process.
A worker that dies or stops answering ends the episodes it hosted as labelled engine failures
and is replaced.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from typing import Any

import gymnasium as gym

from rubricgym.contract import Trajectory
from rubricgym.json_worker import JsonWorker, WorkerDied, close_each, serve_json
from rubricgym.parsing import TagGrammar
from rubricgym.registration import check_env_id, discover
from rubricgym.remote.info_json import info_to_json  # not .wire: a worker never loads OpenEnv

log = logging.getLogger(__name__)

__all__ = ["NoFreeSession", "SessionHost", "SessionPool", "SessionWorker", "WorkerDied"]


class NoFreeSession(RuntimeError):
    """Every session slot is taken (``--max-sessions``)."""


# ---- inside a worker -------------------------------------------------------------------
def describe(env: gym.Env) -> dict[str, Any]:
    """What a client's prompts need of the env: its benchmark, action grammar and task ids."""
    adapter = getattr(env.unwrapped, "adapter", None)
    grammar = getattr(adapter, "grammar", None)
    return {"benchmark": getattr(adapter, "benchmark", type(env.unwrapped).__name__),
            "grammar": {f.name: getattr(grammar, f.name) for f in dataclasses.fields(grammar) if f.init}
            if isinstance(grammar, TagGrammar) else None,
            "task_ids": list(adapter.task_ids()) if adapter is not None else None}


class SessionHost:
    """The envs of one worker, by slot (made on first use, reused by later sessions of the
    slot: every reset starts afresh); every request and answer is a JSON string."""

    def __init__(self, env_id: str, make_kwargs: dict[str, Any]):
        self.env_id, self.make_kwargs = env_id, make_kwargs
        self.envs: dict[int, gym.Env] = {}

    def env(self, slot: int) -> gym.Env:
        if slot not in self.envs:
            self.envs[slot] = gym.make(self.env_id, **self.make_kwargs)
        return self.envs[slot]

    def handle(self, request: str) -> str:
        req = json.loads(request)
        op = req.get("op")
        if op == "close":
            self.close()
            return json.dumps({"closed": True})
        if op not in ("reset", "step"):
            return json.dumps({"error": f"unknown op {op!r}"})
        item = req.get("item", {})
        try:
            return json.dumps(self._reset(item) if op == "reset" else self._step(item))
        except ValueError as exc:  # the env refused the reset's arguments (an unknown task id): the client's
            if op != "reset":
                log.exception("env step failed in a session worker")
                return json.dumps({"error": f"{type(exc).__name__}: {exc}"})
            return json.dumps({"refused": str(exc)})
        except Exception as exc:  # an engine error is this session's, never the worker's end
            log.exception("env %s failed in a session worker", op)
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})

    def _reset(self, item: dict[str, Any]) -> dict[str, Any]:
        env = self.env(int(item["slot"]))
        options = {"task_id": item["task_id"]} if item.get("task_id") is not None else None
        obs, info = env.reset(seed=item.get("seed"), options=options)
        info_json, models = info_to_json(info)
        traj = getattr(env.unwrapped, "trajectory", None)
        return {"observation": obs, "info": info_json, "models": models, "env": describe(env),
                "trajectory": traj.model_dump(mode="json") if isinstance(traj, Trajectory) else None}

    def _step(self, item: dict[str, Any]) -> dict[str, Any]:
        env = self.env(int(item["slot"]))
        obs, reward, terminated, truncated, info = env.step(item["action"])
        info_json, models = info_to_json(info)
        return {"observation": obs, "reward": float(reward), "terminated": bool(terminated),
                "truncated": bool(truncated), "info": info_json, "models": models}

    def close(self) -> None:
        close_each(self.envs.values(), "a session worker")
        self.envs = {}


def _session_main(conn: Any, env_id: str, make_kwargs: dict[str, Any]) -> None:
    """A session worker: a ``SessionHost`` answering JSON requests."""
    discover()  # a spawned worker registers the env ids (plugins included) before making one
    serve_json(conn, SessionHost(env_id, make_kwargs))


# ---- on the server's side ----------------------------------------------------------------
class SessionWorker(JsonWorker):
    """One spawned process hosting a ``SessionHost``; one request at a time, bounded waits."""

    def __init__(self, env_id: str, make_kwargs: dict[str, Any], index: int):
        super().__init__(_session_main, (env_id, make_kwargs), f"session worker {index}")


class SessionPool:
    """``max_sessions`` session slots over ``workers`` worker processes.

    ``call`` is thread-safe: a per-worker lock keeps one request in flight per worker. A
    worker's ``generation`` grows each time it is replaced, so a session whose env died
    with its worker learns it (its episode is over) instead of stepping a fresh env."""

    def __init__(self, env_id: str, make_kwargs: dict[str, Any], max_sessions: int, workers: int,
                 call_timeout_s: float = 120.0):
        if max_sessions < 1 or workers < 1:
            raise ValueError("a SessionPool needs max_sessions >= 1 and workers >= 1")
        self.env_id, self.make_kwargs = check_env_id(env_id), dict(make_kwargs)
        self.size = min(workers, max_sessions)
        self.call_timeout_s = call_timeout_s
        self.workers = [SessionWorker(env_id, self.make_kwargs, i) for i in range(self.size)]
        self.generation = [0] * self.size
        self.locks = [threading.Lock() for _ in range(self.size)]
        self._free = list(range(max_sessions))
        self._slots_lock = threading.Lock()
        self.replaced = 0

    def acquire(self) -> int:
        with self._slots_lock:
            if not self._free:
                raise NoFreeSession("every session slot is taken (--max-sessions)")
            return self._free.pop(0)

    def release(self, slot: int) -> None:
        with self._slots_lock:
            if slot not in self._free:
                self._free.append(slot)

    def worker_of(self, slot: int) -> int:
        return slot % self.size

    def current_generation(self, slot: int) -> int:
        return self.generation[self.worker_of(slot)]

    def call(self, slot: int, op: str, item: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """One request for one slot: the answer, and the generation of the worker it ran in.
        Raises ``WorkerDied`` (after replacing the worker)."""
        w = self.worker_of(slot)
        with self.locks[w]:
            worker, generation = self.workers[w], self.generation[w]
            try:
                answer = json.loads(worker.request(json.dumps({"op": op, "item": {**item, "slot": slot}}),
                                                   self.call_timeout_s))
                if not isinstance(answer, dict):
                    raise WorkerDied(f"{worker.name}: malformed answer")
            except WorkerDied:
                self._replace(w)
                raise
            return answer, generation

    def _replace(self, w: int) -> None:
        old = self.workers[w]
        try:
            old.kill()
        except Exception:
            log.exception("killing %s failed", old.name)
        self.workers[w] = SessionWorker(self.env_id, self.make_kwargs, w)
        self.generation[w] += 1
        self.replaced += 1
        log.warning("%s died; replaced (%d so far)", old.name, self.replaced)

    def close(self) -> None:
        for w, worker in enumerate(self.workers):
            with self.locks[w]:
                try:
                    worker.close(timeout=10)
                except Exception:
                    log.exception("closing %s failed", worker.name)
        self.workers = []
