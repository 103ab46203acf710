"""Env workers: env instances hosted in other processes, stepped concurrently.

``env.workers: N`` puts the rollouts' envs into N worker processes — Ray actors when Ray is
installed (``env.worker_backend: ray``, a local instance or ``env.ray_address``), else a local
process pool (``process``: multiprocessing, spawn). Rollout k lives in worker k mod N; at each
turn every worker gets one call with all its active rollouts, and the calls run in parallel.

Workers build their envs themselves from the config (``gym.make`` / the factory inside the
worker) and exchange JSON only: observation text, reward, flags, the transition as
``Transition`` JSON and the ``info["rubric"]`` record. Nothing is unpickled from a worker's
answer. A worker that dies (or does not answer within ``env.worker_timeout_s``) ends the
rollouts it hosted as labelled engine failures (``Rollout.error`` and a truncated last
transition in the trajectory) and is replaced; the run goes on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rubricgym.contract import Facts, ParsedAction, Trajectory, Transition
from rubricgym.parsing import ACTION_GRAMMAR, TagGrammar
from rubricgym.prompts import PromptSettings
from rubricgym.env_factories import EnvFactory, env_factory, register_env_factories
from rubricgym.registration import has_expert
from rubricgym.json_worker import JsonWorker, WorkerDied, close_each, serve_json
from rubricgym.trainers.config import EnvSettings
from rubricgym.trainers.rollout import (LocalEnvSlots, ResetJob, RolloutCollector, SlotAnswer,
                                        make_env_factory)

log = logging.getLogger(__name__)

WORKER_DIED = "EngineFailure: env worker died"



# ---- inside a worker -------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """JSON-safe copy; numpy scalars become Python numbers, anything else is refused."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON data: {type(value).__name__}")


def _trajectory_json(env: Any) -> dict[str, Any] | None:
    traj = getattr(env.unwrapped, "trajectory", None)
    return traj.model_dump(mode="json") if isinstance(traj, Trajectory) else None


class EnvHost:
    """The envs of one worker, by slot; every request and answer is a JSON string."""

    def __init__(self, settings_json: str, factories: dict[str, EnvFactory] | None = None):
        # a spawned worker starts with an empty registry: the trainer's registered factories come along
        register_env_factories(factories or {})
        self.settings = EnvSettings.model_validate_json(settings_json)
        self.env_fn = make_env_factory(self.settings)
        self.envs: dict[int, Any] = {}

    def env(self, slot: int) -> Any:
        if slot not in self.envs:
            self.envs[slot] = self.env_fn()
        return self.envs[slot]

    def handle(self, request: str) -> str:
        req = json.loads(request)
        op = req.get("op")
        if op == "describe":
            try:
                return json.dumps(self.describe())
            except Exception as exc:  # e.g. the env cannot be built here: the trainer says why
                log.exception("building the env in a worker failed")
                return json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        if op == "pid":
            return json.dumps({"pid": os.getpid()})
        if op == "close":
            self.close()
            return json.dumps({"closed": True})
        if op not in ("reset", "step"):
            return json.dumps({"error": f"unknown op {op!r}"})
        out = []
        for item in req.get("items", []):
            try:
                answer = self._reset(item) if op == "reset" else self._step(item)
                out.append(_plain(answer))
            except Exception as exc:  # an engine error is this rollout's, never the worker's end
                log.exception("env %s failed in a worker", op)
                env = self.envs.get(int(item.get("slot", -1)))
                out.append({"error": f"{type(exc).__name__}: {exc}",
                            "trajectory": _trajectory_json(env) if env is not None else None})
        return json.dumps(out)

    def describe(self) -> dict[str, Any]:
        env = self.env(0)
        adapter = getattr(env.unwrapped, "adapter", None)
        grammar = getattr(adapter, "grammar", None)
        return {"benchmark": getattr(adapter, "benchmark", type(env.unwrapped).__name__),
                "task_ids": list(adapter.task_ids()) if adapter is not None else None,
                "has_expert": has_expert(env),
                "grammar": {f.name: getattr(grammar, f.name) for f in dataclasses.fields(grammar) if f.init}
                if isinstance(grammar, TagGrammar) else None}

    def _reset(self, item: dict[str, Any]) -> dict[str, Any]:
        env = self.env(int(item["slot"]))
        obs, info = env.reset(seed=item["seed"], options={"task_id": item["task_id"]})
        return {"observation": obs, "instruction": str(info.get("instruction", "")),
                "admissible_actions": info.get("admissible_actions"), "action_templates": info.get("action_templates"),
                "trajectory": _trajectory_json(env)}

    def _step(self, item: dict[str, Any]) -> dict[str, Any]:
        env = self.env(int(item["slot"]))
        obs, reward, terminated, truncated, info = env.step(item["action"])
        transition = info.get("transition")
        done = bool(terminated or truncated)
        return {"observation": obs, "reward": float(reward), "terminated": bool(terminated),
                "truncated": bool(truncated),
                "transition": transition.model_dump(mode="json") if isinstance(transition, Transition) else None,
                "rubric": info.get("rubric"), "has_rubric": "rubric" in info,
                "admissible_actions": info.get("admissible_actions"), "action_templates": info.get("action_templates"),
                "trajectory": _trajectory_json(env) if done else None}

    def close(self) -> None:
        close_each(self.envs.values(), "an env worker")
        self.envs = {}


def _process_main(conn: Any, settings_json: str, factories: dict[str, EnvFactory]) -> None:
    """The process-pool worker: an ``EnvHost`` answering JSON requests."""
    serve_json(conn, EnvHost(settings_json, factories))


# ---- on the trainer's side ---------------------------------------------------------------
class Pending(Protocol):
    def result(self, timeout: float) -> str: ...


class EnvWorker(Protocol):
    name: str

    def submit(self, request: str) -> Pending: ...

    def kill(self) -> None: ...

    def close(self, timeout: float) -> None: ...


class ProcessWorker(JsonWorker):
    """One spawned process hosting an ``EnvHost``. Registered factories travel as the
    callables themselves (by reference, from this process's registry), so the worker never
    resolves a name only this process registered."""

    def __init__(self, settings_json: str, index: int, factories: dict[str, EnvFactory] | None = None):
        super().__init__(_process_main, (settings_json, factories or {}), f"process worker {index}")


_RAY_ACTOR: Any = None


def _ray_actor_class() -> Any:
    global _RAY_ACTOR
    if _RAY_ACTOR is None:
        import ray  # optional: the ray extra

        @ray.remote(max_restarts=0, max_task_retries=0)
        class EnvActor:
            def __init__(self, settings_json: str, factories: dict[str, EnvFactory]):
                self.host = EnvHost(settings_json, factories)

            def handle(self, request: str) -> str:
                return self.host.handle(request)

        _RAY_ACTOR = EnvActor
    return _RAY_ACTOR


class _RayPending:
    def __init__(self, worker: RayWorker, ref: Any):
        self.worker, self.ref = worker, ref

    def result(self, timeout: float) -> str:
        import ray  # optional: the ray extra
        from ray.exceptions import GetTimeoutError, RayActorError, RayError  # optional: the ray extra

        try:
            return str(ray.get(self.ref, timeout=timeout))
        except RayActorError as exc:  # ActorDiedError and its kin
            raise WorkerDied(f"{self.worker.name}: {type(exc).__name__}") from exc
        except GetTimeoutError as exc:
            self.worker.kill()
            raise WorkerDied(f"{self.worker.name}: no answer within {timeout:.0f} s (killed)") from exc
        except RayError as exc:  # anything else Ray reports: the worker is not trusted further
            raise WorkerDied(f"{self.worker.name}: {type(exc).__name__}: {str(exc)[:300]}") from exc


class RayWorker:
    """One Ray actor hosting an ``EnvHost`` (on this machine or anywhere in the Ray cluster)."""

    def __init__(self, settings_json: str, index: int, num_cpus: float = 1.0,
                 factories: dict[str, EnvFactory] | None = None):
        self.actor = _ray_actor_class().options(num_cpus=num_cpus).remote(settings_json, factories or {})
        self.name = f"ray worker {index}"

    def submit(self, request: str) -> _RayPending:
        return _RayPending(self, self.actor.handle.remote(request))

    def kill(self) -> None:
        import ray  # optional: the ray extra

        ray.kill(self.actor, no_restart=True)

    def close(self, timeout: float) -> None:
        try:
            self.submit(json.dumps({"op": "close"})).result(timeout)
        except WorkerDied:
            pass
        self.kill()


def ray_available() -> bool:
    try:
        import ray  # noqa: F401  # optional: the ray extra
    except ImportError:
        return False
    return True


def ensure_ray(address: str | None, num_cpus: int | None = None) -> None:
    """Connect to ``address`` or start a local Ray instance (once per process)."""
    import ray  # optional: the ray extra

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus or max(2, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)


class WorkerPool:
    """N env workers of one backend; a dead worker is replaced by a fresh one."""

    def __init__(self, settings: EnvSettings, workers: int | None = None, backend: str | None = None):
        self.settings = settings
        self.size = workers or settings.workers
        if self.size < 1:
            raise ValueError("a WorkerPool needs at least one worker (env.workers >= 1)")
        backend = backend or settings.worker_backend
        if backend == "auto":
            backend = "ray" if ray_available() else "process"
        if backend == "ray":
            if not ray_available():
                raise RuntimeError("env.worker_backend='ray' needs Ray: pip install 'rubricgym[ray]' "
                                   "(or env.worker_backend='process')")
            ensure_ray(settings.ray_address, num_cpus=max(self.size, 2))
        self.backend = backend
        # the worker builds its env from the settings alone; it never runs more than one at a time
        self.settings_json = settings.model_copy(update={"workers": 0}).model_dump_json()
        # the one factory the workers need (an unknown name fails here, not in every worker)
        self.factories = {settings.factory: env_factory(settings.factory)} if settings.factory else {}
        self.started = 0
        self.replaced = 0
        self.workers: list[EnvWorker] = [self._new(i) for i in range(self.size)]

    def _new(self, index: int) -> EnvWorker:
        self.started += 1
        if self.backend == "ray":
            return RayWorker(self.settings_json, index, factories=self.factories)
        return ProcessWorker(self.settings_json, index, factories=self.factories)

    def worker_of(self, slot: int) -> int:
        return slot % self.size

    def replace(self, index: int) -> None:
        old = self.workers[index]
        try:
            old.kill()
        except Exception:
            log.exception("killing %s failed", old.name)
        self.workers[index] = self._new(index)
        self.replaced += 1
        log.warning("env worker %s died; replaced (%d replacements so far)", old.name, self.replaced)

    def call(self, op: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any] | WorkerDied]:
        """One request per worker with its items (in parallel); answers in item order.

        Items of a worker that died get its ``WorkerDied``; the worker is replaced."""
        by_worker: dict[int, list[int]] = {}
        for k, item in enumerate(items):
            by_worker.setdefault(self.worker_of(int(item["slot"])), []).append(k)
        pending = {w: self.workers[w].submit(json.dumps({"op": op, "items": [items[k] for k in ks]}))
                   for w, ks in by_worker.items()}
        out: list[Any] = [None] * len(items)
        deadline = time.monotonic() + self.settings.worker_timeout_s
        for w, ks in by_worker.items():
            try:
                answers = json.loads(pending[w].result(max(0.1, deadline - time.monotonic())))
                if not isinstance(answers, list) or len(answers) != len(ks):
                    raise WorkerDied(f"{self.workers[w].name}: malformed answer")
            except WorkerDied as exc:
                self.replace(w)
                answers = [exc] * len(ks)
            for k, answer in zip(ks, answers, strict=True):
                out[k] = answer
        return out

    def request(self, index: int, op: str) -> dict[str, Any]:
        """A single request to one worker (describe, pid)."""
        try:
            return json.loads(self.workers[index].submit(json.dumps({"op": op})).result(self.settings.worker_timeout_s))
        except WorkerDied:
            self.replace(index)
            raise

    def close(self) -> None:
        for w in self.workers:
            try:
                w.close(timeout=30)
            except Exception:
                log.exception("closing %s failed", w.name)
        self.workers = []


# ---- the collector ---------------------------------------------------------------------------
@dataclass
class AdapterSummary:
    """What the trainer reads from a local adapter, answered by a worker."""

    benchmark: str
    ids: list[str] | None
    has_expert: bool = False
    grammar: TagGrammar = ACTION_GRAMMAR  # the prompt's action format

    def task_ids(self) -> list[str]:
        if self.ids is None:
            raise ValueError("this env exposes no adapter.task_ids(): set env.tasks in the config")
        return list(self.ids)


@dataclass
class WorkerEnvView:
    """The trainer-side view of one env slot in a worker: its adapter summary and the
    episode's trajectory, kept up to date from the worker's answers."""

    slot: int
    adapter: AdapterSummary
    trajectory: Trajectory | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def unwrapped(self) -> WorkerEnvView:
        return self


class WorkerEnvSlots:
    """``EnvSlots`` in a ``WorkerPool``: the resets and steps of a turn run concurrently across
    workers; each slot's ``WorkerEnvView`` keeps the episode's trajectory from the answers."""

    def __init__(self, settings: EnvSettings, pool: WorkerPool | None = None):
        self.settings = settings
        self.pool = pool or WorkerPool(settings)
        info = self.pool.request(0, "describe")
        if "error" in info:
            self.pool.close()
            raise RuntimeError(f"env worker could not build the env ({settings.factory or settings.id}): {info['error']}")
        grammar = info.get("grammar")
        if grammar is not None:
            grammar = TagGrammar(**{k: tuple(v) if isinstance(v, list) else v for k, v in grammar.items()})
        self.summary = AdapterSummary(info["benchmark"], info["task_ids"], bool(info["has_expert"]),
                                      grammar or ACTION_GRAMMAR)
        self.remote: dict[int, WorkerEnvView] = {}

    def env(self, slot: int) -> WorkerEnvView:
        if slot not in self.remote:
            self.remote[slot] = WorkerEnvView(slot, self.summary)
        return self.remote[slot]

    def close(self) -> None:
        self.pool.close()
        self.remote = {}

    def reset(self, jobs: Sequence[ResetJob]) -> list[SlotAnswer]:
        answers = self.pool.call("reset", [{"slot": j.slot, "seed": j.seed, "task_id": j.task_id} for j in jobs])
        out = []
        for job, answer in zip(jobs, answers, strict=True):
            self.env(job.slot).trajectory = _trajectory(answer)
            failure = _failure_text(answer)
            if failure is not None or not isinstance(answer, dict):
                out.append(SlotAnswer(failure=failure))
            else:
                out.append(SlotAnswer(observation=answer["observation"], info=answer))
        return out

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[SlotAnswer]:
        answers = self.pool.call("step", [{"slot": slot, "action": text} for slot, text in zip(slots, actions)])
        return [self._answer(self.env(slot), text, answer) for slot, text, answer in zip(slots, actions, answers,
                                                                                            strict=True)]

    @staticmethod
    def _answer(env: WorkerEnvView, text: str, answer: dict[str, Any] | WorkerDied) -> SlotAnswer:
        failure = _failure_text(answer)
        if failure is not None or not isinstance(answer, dict):
            # a worker that died: the trajectory gets a truncated last transition for the response never stepped
            if failure is not None and failure.startswith(WORKER_DIED) and env.trajectory is not None:
                traj = env.trajectory
                traj.transitions.append(Transition(
                    benchmark=traj.benchmark, step=len(traj.transitions), response=text,
                    action=ParsedAction(ok=False, detail="not stepped: the env worker died"),
                    observation="", facts=Facts(parsed=False, episode_done=True), truncated=True, error=failure))
            return SlotAnswer(failure=failure)
        transition = Transition.model_validate(answer["transition"]) if answer["transition"] else None
        if answer["trajectory"] is not None:
            env.trajectory = Trajectory.model_validate(answer["trajectory"])
        elif env.trajectory is not None and transition is not None:
            env.trajectory.transitions.append(transition.model_copy(deep=True))
        info: dict[str, Any] = {"admissible_actions": answer["admissible_actions"],
                                "action_templates": answer.get("action_templates")}
        if transition is not None:
            info["transition"] = transition
        if answer.get("has_rubric"):
            info["rubric"] = answer["rubric"]
        return SlotAnswer(answer["observation"], float(answer["reward"]), bool(answer["terminated"]),
                          bool(answer["truncated"]), info)


def _failure_text(answer: Any) -> str | None:
    if isinstance(answer, WorkerDied):
        return f"{WORKER_DIED}: {answer}"
    if isinstance(answer, dict) and "error" in answer:
        return str(answer["error"])
    return None


def _trajectory(answer: Any) -> Trajectory | None:
    if isinstance(answer, dict) and answer.get("trajectory"):
        return Trajectory.model_validate(answer["trajectory"])
    return None


def build_collector(settings: EnvSettings, env_fn: Any, tokenizer: Any, prompt: PromptSettings, max_steps: int,
                    env_fn_injected: bool = False, first_env: Any = None) -> RolloutCollector:
    """The trainer's collector: in-process envs (``first_env``, already made, is the first of
    them), or ``env.workers`` workers (which make their own: ``first_env`` is closed)."""
    if settings.workers <= 0:
        return RolloutCollector(LocalEnvSlots(env_fn, first=first_env), tokenizer, prompt, max_steps)
    if first_env is not None:
        first_env.close()
    if env_fn_injected:
        raise ValueError("env.workers needs env.id or env.factory (workers build their own envs); "
                         "an env_fn passed to the Trainer runs in-process: set env.workers=0")
    return RolloutCollector(WorkerEnvSlots(settings), tokenizer, prompt, max_steps)
