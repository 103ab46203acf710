"""``rubricgym.evaluate``: ``rubricgym eval`` from Python, with the agent as an object.

A notebook's agent lives in ``__main__``, which a spawned worker cannot import, so no
``module:function`` string is needed here: the episodes are played in this process, on one
asyncio loop, up to ``concurrency`` at once (an env each, stepped on the loop's thread). An
async agent is awaited on that loop; a sync one is called on it when ``concurrency`` is 1,
else in a thread per call so that its blocking calls (an HTTP request) overlap. The output
folder, the records, ``--resume`` / ``--retry-errors`` and the summary are ``run_eval``'s, the
same as the command's.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.registration import task_ids
from rubricgym.secret_refs import redact_json
from rubricgym.trainers.eval.policies import PolicySpec, Reply
from rubricgym.trainers.eval.runner import Progress, run_eval
from rubricgym.trainers.eval.settings import EvalSettings
from rubricgym.trainers.eval.workers import AskPolicy, play_episode
from rubricgym.trainers.preflight import SetupError, check_agent, check_env, is_async, validation_message


def agent_function(agent: Any) -> Callable[..., Any]:
    """The callable that answers: ``agent`` itself, or its ``respond`` method (an agent object)."""
    function = agent if callable(agent) else getattr(agent, "respond", None)
    if function is None:
        raise SetupError("the agent is neither callable nor has a respond method", type(agent).__name__,
                         "pass a function respond(messages) -> str (sync or async), or an object with one")
    check_agent(function, getattr(function, "__qualname__", type(agent).__name__))
    return function


def _label(function: Callable[..., Any]) -> str:
    """Where the agent is defined, for the summary (``module:name``; never imported from it)."""
    module = getattr(function, "__module__", None) or "__main__"
    return f"{module}:{getattr(function, '__qualname__', type(function).__name__)}"


def asker(function: Callable[..., Any], concurrency: int) -> AskPolicy:
    """The agent as the episode loop awaits it: the messages copied, the ``env_id`` /
    ``task_id`` keywords it names passed, its answer as text."""
    try:
        accepts: Any = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature: the messages alone
        accepts = {}
    asynchronous = is_async(function)

    async def ask(messages: list[dict[str, str]], env_id: str, task_id: str) -> Reply:
        extra = {k: v for k, v in (("env_id", env_id), ("task_id", task_id)) if k in accepts}
        copied = [dict(m) for m in messages]
        if asynchronous:
            answer = await function(copied, **extra)
        elif concurrency > 1:
            answer = await asyncio.to_thread(function, copied, **extra)
        else:
            answer = function(copied, **extra)
        if inspect.isawaitable(answer):  # a sync wrapper that returns a coroutine
            answer = await answer
        return Reply(text=str(answer))

    return ask


async def _play_here(ask: AskPolicy, settings: EvalSettings, jobs: list[tuple[str, int, int]], episodes: Path,
                     progress: Progress | None) -> None:
    import gymnasium as gym  # lazy: the env package loads when episodes are played

    from rubricgym.trainers.run_files import append_run_line  # lazy: run_files loads torch (see run_eval)

    kwargs = {**settings.env_kwargs, **({"max_steps": settings.max_steps} if settings.max_steps else {})}
    pending = list(reversed(jobs))
    finished = [0]
    envs = [gym.make(settings.env_id, **kwargs) for _ in range(min(settings.concurrency, len(jobs)))]

    async def lane(env: Any) -> None:
        while pending:
            task, sample, seed = pending.pop()
            record = await play_episode(env, ask, settings.env_id, task, sample, seed)
            append_run_line(episodes, json.dumps(redact_json(record), default=str))
            finished[0] += 1
            if progress is not None:
                progress(record, finished[0], len(jobs))

    try:
        await asyncio.gather(*(lane(env) for env in envs))
    finally:
        for env in envs:
            env.close()


def in_process_player(function: Callable[..., Any]) -> Callable[..., None]:
    """A ``run_eval`` player for ``function``: the jobs on this process's loop (a thread of its
    own when a loop already runs here, as in Jupyter, where ``asyncio.run`` is refused)."""
    def play(settings: EvalSettings, jobs: list[tuple[str, int, int]], episodes: Path,
             progress: Progress | None) -> None:
        def run() -> None:
            asyncio.run(_play_here(asker(function, settings.concurrency), settings, jobs, episodes, progress))

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run()
        with ThreadPoolExecutor(1, thread_name_prefix="rubricgym-evaluate") as thread:
            thread.submit(run).result()
        return None

    return play


def _tasks(env_id: str, tasks: Sequence[str] | int | None, split: str, env_kwargs: dict[str, Any]) -> list[str]:
    if isinstance(tasks, str):
        return [t for t in tasks.split(",") if t]
    if tasks is None or isinstance(tasks, int):
        available = list(task_ids(env_id, split=split, **env_kwargs))  # type: ignore[arg-type]
        return available[:tasks] if tasks else available
    return list(tasks)


def evaluate(env_id: str, agent: Any, tasks: Sequence[str] | int | None = None, samples: int = 1,
             concurrency: int = 1, out: str | Path = "runs/eval", *, split: str = "train", seed: int = 0,
             max_steps: int | None = None, env_kwargs: dict[str, Any] | None = None, resume: bool = False,
             retry_errors: bool = False, progress: bool = True) -> dict[str, Any]:
    """Measure ``agent`` on ``env_id`` as ``rubricgym eval --policy callable`` would, and return
    the summary (``OUT/summary.json``; the episodes are ``OUT/episodes.jsonl``).

    ``agent``: a function ``respond(messages) -> str`` (sync or async; it may accept ``env_id``
    and ``task_id`` keywords) or an object with such a ``respond`` method (or ``__call__``).
    ``tasks``: task ids, or N for the first N of ``split``, or None for all. Anything wrong is
    a ``SetupError`` (a ``ValueError``) before any folder is made."""
    function = agent_function(agent)
    env_kwargs = dict(env_kwargs or {})
    check_env(env_id, env_kwargs)
    try:
        settings = EvalSettings(
            env_id=env_id, env_kwargs=env_kwargs, tasks=_tasks(env_id, tasks, split, env_kwargs), samples=samples,
            seed=seed, concurrency=concurrency, max_steps=max_steps, out=str(out), resume=resume,
            retry_errors=retry_errors, policy=PolicySpec(kind="agent", callable=_label(function)))
    except ValidationError as exc:
        raise SetupError(validation_message(exc), None, "see help(rubricgym.evaluate)") from None
    bar = None
    if progress:
        from rubricgym.trainers.eval.cli import EvalProgress  # lazy: the command's progress bar, only when shown

        bar = EvalProgress(settings)
    try:
        return run_eval(settings, bar, notice=lambda text: print(f"rubricgym.evaluate: {text}", file=sys.stderr),
                        play=in_process_player(function))
    finally:
        if bar is not None:
            bar.close()
