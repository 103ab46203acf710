"""Where episodes are played: the worker processes, one episode's loop, the record queue.

Episodes run ``--concurrency`` at a time in worker processes (engines change process-wide
state: envs are stepped only on a worker's main thread, never in threads): one episode per
process by default; with ``--workers W`` below the concurrency, each worker plays several
episodes at once, an env each, and their endpoint calls are in flight together (asyncio; the
blocking HTTP call waits in a thread, the env steps on the loop). Each record reaches the parent
as its episode ends. A call that fails after its retries ends the episode as
``policy_error`` (counted as a failure: what the policy's endpoint did counts against it); an
env that fails ends it as ``env_error`` (reported apart, not in the success rate).
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import queue
import signal
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rubricgym.benchmark import BenchmarkSpec
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages
from rubricgym.records import step_records
from rubricgym.registration import register_benchmarks, registered_in_process
from rubricgym.secret_refs import redact_json
from rubricgym.tool_surface import ToolSpec, response_from_tool_calls, tool_surface
from rubricgym.trainers.eval.policies import ChatPolicy, Reply, build_policy
from rubricgym.trainers.eval.settings import EvalSettings, Outcome


AskPolicy = Callable[[list[dict[str, str]], str, str], Awaitable[Reply]]


async def play_episode(env: Any, ask: AskPolicy, env_id: str, task_id: str, sample: int, seed: int,
                       tools: Sequence[ToolSpec] = ()) -> dict[str, Any]:
    """One episode; its record (never raises for what the policy or the env did). The env is
    stepped here, on the caller's thread; only the policy's answer is awaited. With ``tools``
    (``--native-tools``) a reply's function calls become the env response they stand for
    (``response_from_tool_calls``); the step record keeps the calls as sent."""
    settings = PromptSettings(style="chat")
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    view = EpisodeView.start(env, obs, info)
    steps: list[dict[str, Any]] = []
    transcript: list[list[dict[str, str]]] = []
    outcome: Outcome = "truncated"
    error = None
    tokens = [0, 0]
    while True:
        messages = build_messages(view, settings)
        transcript.append(messages)
        try:
            reply = await ask(messages, env_id, task_id)
        except Exception as exc:  # noqa: BLE001 - the policy's failure is the episode's outcome
            outcome, error = "policy_error", f"{type(exc).__name__}: {exc}"
            break
        tokens[0] += reply.prompt_tokens
        tokens[1] += reply.completion_tokens
        response = response_from_tool_calls(tools, reply.tool_calls, reply.text, view.grammar) if tools else reply.text
        obs, reward, terminated, truncated, info = env.step(response)
        records = step_records(info)
        steps.append({"response": response, **({"tool_calls": [list(c) for c in reply.tool_calls]} if tools else {}),
                      "reward": float(reward), "env_reward": float(info["transition"].env_reward),
                      "rubric": dict(info.get("rubric") or {}),
                      "trca_reward": (records.trca().r_TRCA if records.trca() is not None else None),
                      "parsed": bool(info["transition"].action.ok),
                      "accepted": bool(info["transition"].facts.accepted)})
        view.record(response, obs, info)
        if info.get("environment_failure"):
            outcome, error = "env_error", str(info.get("error"))
            break
        if terminated or truncated:
            success = info["outcome"].success if "outcome" in info else None
            outcome = "success" if success else ("truncated" if truncated and not terminated else "failure")
            break
    trajectory = env.unwrapped.trajectory
    result = trajectory.outcome
    return {"env_id": env_id, "task_id": task_id, "sample": sample, "seed": seed, "outcome": outcome,
            "success": outcome == "success", "score": result.score, "steps": len(steps),
            "return": sum(s["reward"] for s in steps), "env_return": sum(s["env_reward"] for s in steps),
            "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "error": error,
            "step_records": steps, "transcript": transcript, "trajectory": json.loads(trajectory.to_json_line())}


_WORKER: dict[str, Any] = {}


def _asker(kind: str, policy: ChatPolicy) -> AskPolicy:
    """The policy as an awaitable. An endpoint's blocking HTTP call waits in a thread, so a
    worker's episodes have their calls in flight together; a user's function and a local model
    are called on the loop (one at a time: neither is assumed thread-safe)."""
    if kind == "endpoint":
        async def ask_endpoint(messages: list[dict[str, str]], env_id: str, task_id: str) -> Reply:
            return await asyncio.to_thread(policy, messages, env_id, task_id)

        return ask_endpoint

    async def ask_here(messages: list[dict[str, str]], env_id: str, task_id: str) -> Reply:
        return policy(messages, env_id, task_id)

    return ask_here


def _start_worker(settings: EvalSettings, records: Any, specs: Sequence[BenchmarkSpec] = ()) -> None:
    """A worker process's envs (one per episode it plays at once) and policy, built once (the
    engine's process-wide state stays here); ``records`` is the queue its episodes' records go
    to; ``specs`` the benchmark the parent registered in code (``registered_in_process``: a
    spawned process discovers only installed plugins). What fails to build is kept and
    becomes each episode's labelled outcome."""
    import gymnasium as gym  # lazy CLI: imported in the worker process that plays

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    register_benchmarks(specs)
    kwargs = {**settings.env_kwargs, **({"max_steps": settings.max_steps} if settings.max_steps else {})}
    _WORKER.update(records=records, tools=[], envs=[])
    for name, build, outcome in (
            ("envs", lambda: [gym.make(settings.env_id, **kwargs) for _ in range(settings.episodes_per_worker)],
             "env_error"),
            ("tools", lambda: tool_surface(settings.env_id, **settings.env_kwargs)
             if settings.policy.native_tools else [], "policy_error"),
            ("ask", lambda: _asker(settings.policy.kind, build_policy(settings.policy, _WORKER["tools"])),
             "policy_error")):
        try:
            _WORKER[name] = build()
        except Exception as exc:  # noqa: BLE001 - reported in every episode record, never a dead pool
            _WORKER["broken"] = (outcome, f"{name} could not be built: {type(exc).__name__}: {exc}")
            return


def _broken_record(env_id: str, task_id: str, sample: int, seed: int) -> dict[str, Any]:
    outcome, error = _WORKER["broken"]
    return {"env_id": env_id, "task_id": task_id, "sample": sample, "seed": seed, "outcome": outcome,
            "success": False, "score": None, "steps": 0, "return": 0.0, "env_return": 0.0, "prompt_tokens": 0,
            "completion_tokens": 0, "error": error, "step_records": [], "transcript": []}


def _worker_batch(env_id: str, jobs: Sequence[tuple[str, int, int]]) -> int:
    """Play ``jobs`` (at most one per env of this worker) at once; each record goes to the queue
    as its episode ends. Returns how many were played."""
    records = _WORKER["records"]
    # the policy's key was read here, not in the parent that writes the record: an endpoint
    # that echoes it (in a reply, an error) must not carry it to disk
    if "broken" in _WORKER:
        for job in jobs:
            records.put(redact_json(_broken_record(env_id, *job)))
        return len(jobs)

    async def play(env: Any, task_id: str, sample: int, seed: int) -> None:
        record = await play_episode(env, _WORKER["ask"], env_id, task_id, sample, seed, _WORKER["tools"])
        records.put(redact_json(record))

    async def play_all() -> None:
        await asyncio.gather(*(play(env, *job) for env, job in zip(_WORKER["envs"], jobs, strict=False)))

    asyncio.run(play_all())
    return len(jobs)


def play_jobs(settings: EvalSettings, jobs: list[tuple[str, int, int]], episodes: Path,
          progress: Callable[[dict[str, Any], int, int], None] | None) -> None:
    """Play ``jobs`` on the worker processes, a batch of ``episodes_per_worker`` per task, and
    append each record to ``episodes`` as it arrives (its episode has ended)."""
    from rubricgym.trainers.run_files import append_run_line  # lazy CLI: run_files loads torch (see run_eval)

    ctx = multiprocessing.get_context("spawn")  # torch and the engines are not fork-safe once loaded
    records: Any = ctx.Queue()
    size = settings.episodes_per_worker
    # the env's benchmark when this process registered it in code (only that one: others need
    # not be importable elsewhere); by module path, re-registered in each worker
    specs = registered_in_process(settings.env_id)
    with ProcessPoolExecutor(max_workers=min(settings.worker_count, math.ceil(len(jobs) / size)), mp_context=ctx,
                             initializer=_start_worker, initargs=(settings, records, specs)) as pool:
        batches = [pool.submit(_worker_batch, settings.env_id, jobs[i:i + size]) for i in range(0, len(jobs), size)]
        finished = 0
        try:
            while finished < len(jobs):
                try:
                    record = records.get(timeout=0.2)
                except queue.Empty:
                    for batch in batches:  # a worker that died, or a bug: the run stops with it
                        if batch.done() and batch.exception() is not None:
                            raise batch.exception() from None  # type: ignore[misc]
                    continue
                append_run_line(episodes, json.dumps(record, default=str))
                finished += 1
                if progress is not None:
                    progress(record, finished, len(jobs))
        except KeyboardInterrupt:  # every finished episode is on disk; the ones in flight are dropped
            pool.shutdown(wait=False, cancel_futures=True)
            for child in multiprocessing.active_children():
                child.terminate()
            raise
