"""``rubricgym eval``: measure an agent on an env, with where in each episode the rubric paid
or charged; resumable.

    rubricgym eval --env ALFWorld-Rubric-v0 --n 8 --samples 2 --policy endpoint \\
        --base-url http://127.0.0.1:8080/v1 --model smollm2 --concurrency 2 --out runs/eval

Policies (``--policy``): ``endpoint`` (an OpenAI-compatible chat endpoint; the key only by
reference, ``--api-key-env`` / ``--api-key-file``, as the judge), ``local`` (a model through
``rubricgym.models``: ``smollm2``, ``tiny`` or a folder), ``callable`` (``--callable
module:function``, a user's own agent: called with the chat messages so far, a list of
``{"role", "content"}`` dicts, and returning the response text; it may accept ``env_id`` and
``task_id`` keywords), ``adapter`` (``--adapter RUN_DIR``: a training run's LoRA weights on
its base model, through the pickle-free checkpoint reader). The prompt is the trainer's for that env (``rubricgym.prompts``, chat
style); the transcript sent is stored with each episode.

Episodes run ``--concurrency`` at a time in worker processes (engines change process-wide
state: envs are stepped only on a worker's main thread, never in threads): one episode per
process by default; with ``--workers W`` below the concurrency, each worker plays several
episodes at once, an env each, and their endpoint calls are in flight together (asyncio; the
blocking HTTP call waits in a thread, the env steps on the loop). Each record reaches the parent
as its episode ends. A call that fails after its retries ends the episode as
``policy_error`` (counted as a failure: what the policy's endpoint did counts against it); an
env that fails ends it as ``env_error`` (reported apart, not in the success rate). Every
episode is appended to ``OUT/episodes.jsonl`` as it finishes; ``--resume`` skips the (task,
sample) pairs already there. ``OUT/summary.json`` holds success rates, returns, tokens, cost
and the rubric's reward by step index.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import math
import multiprocessing
import queue
import signal
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from tqdm.auto import tqdm

from rubricgym.credit.draco import DracoVariant
from rubricgym.jsonl import iter_json_lines
from rubricgym.judges.config import JudgeSettings
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages
from rubricgym.records import step_records
from rubricgym.registration import check_env_id, task_ids
from rubricgym.secret_refs import redact_json, refuse_inline_secrets
from rubricgym.tool_surface import ToolSpec, response_from_tool_calls, tool_surface
from rubricgym.trainers.statistics import mcnemar_exact, pass_at_k, pass_hat_k, wilson_interval
from rubricgym.trainers.eval_judge import JUDGE_FILE, EvalJudge, judge_episodes

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
Outcome = Literal["success", "failure", "truncated", "policy_error", "env_error"]


class PolicySpec(BaseModel):
    """What answers: everything a worker process needs to build the policy (no key: only where
    to read it)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["endpoint", "local", "callable", "adapter"]
    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str | None = None
    callable: str | None = Field(None, description="module:function (policy 'callable')")
    local_model: str = Field("smollm2", description="policy 'local': smollm2, tiny, or a model folder")
    adapter: str | None = Field(None, description="policy 'adapter': a training run folder (its newest intact checkpoint)")
    temperature: float = 0.0
    max_tokens: int = Field(256, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0)
    native_tools: bool = Field(False, description="offer the benchmark's tool surface as the endpoint's tools=")

    @model_validator(mode="after")
    def _complete(self) -> PolicySpec:
        refuse_inline_secrets(self.model_dump(), "policy")
        if self.native_tools and self.kind != "endpoint":
            raise ValueError("--native-tools sends the env's tools as an endpoint's function-calling tools=: it "
                             "needs --policy endpoint")
        if self.kind == "endpoint" and not self.base_url:
            raise ValueError("policy 'endpoint' needs --base-url (an OpenAI-compatible endpoint, e.g. "
                             "http://127.0.0.1:8080/v1)")
        if self.kind == "callable" and (not self.callable or ":" not in self.callable):
            raise ValueError("policy 'callable' needs --callable module:function")
        if self.kind == "adapter" and not self.adapter:
            raise ValueError("policy 'adapter' needs --adapter RUN_DIR (a rubricgym train run folder)")
        return self


class EvalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="gym.make keyword arguments (never a key)")
    tasks: list[str]
    samples: int = Field(1, ge=1)
    seed: int = 0
    concurrency: int = Field(1, ge=1)
    workers: int | None = Field(None, ge=1, description="worker processes (default: one per episode in flight)")
    max_steps: int | None = Field(None, ge=1)
    out: str = "runs/eval"
    resume: bool = False
    price_prompt_per_mtok: float = Field(0.0, ge=0)
    price_completion_per_mtok: float = Field(0.0, ge=0)
    policy: PolicySpec
    judge: EvalJudge | None = Field(None, description="--judge: DRACO verdicts, the K samples of a task one group")

    @property
    def worker_count(self) -> int:
        return min(self.workers or self.concurrency, self.concurrency)

    @property
    def episodes_per_worker(self) -> int:
        """Episodes a worker plays at once (its envs): the concurrency spread over the workers."""
        return math.ceil(self.concurrency / self.worker_count)

    @model_validator(mode="after")
    def _groups(self) -> EvalSettings:
        if self.judge is not None and self.samples < 2:
            raise ValueError("--judge scores the K samples of a task as one group: it needs --samples 2 or more")
        return self


class Reply(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: list[tuple[str, str]] = Field(default_factory=list, description="(name, arguments JSON) per call")


class PolicyError(RuntimeError):
    """The policy could not answer (its endpoint failed after the retries, or it raised)."""


ChatPolicy = Callable[[list[dict[str, str]], str, str], Reply]


def build_policy(spec: PolicySpec, tools: Sequence[ToolSpec] = ()) -> ChatPolicy:
    """The policy as a function of (messages, env id, task id). Endpoint and local models go
    through the judge's chat backends: one implementation of bounded, retried calls. ``tools``
    (``--native-tools``) are offered to the endpoint as its function-calling ``tools=``."""
    if spec.kind == "callable":
        module_name, _, name = str(spec.callable).partition(":")
        function = getattr(importlib.import_module(module_name), name)  # the user named it on the command line
        accepts = inspect.signature(function).parameters

        def call_user(messages: list[dict[str, str]], env_id: str, task_id: str) -> Reply:
            extra = {k: v for k, v in (("env_id", env_id), ("task_id", task_id)) if k in accepts}
            return Reply(text=str(function([dict(m) for m in messages], **extra)))

        return call_user
    from rubricgym.judges.client import ChatRequest, OpenAIChatBackend, TransformersChatBackend  # optional: the judge extra (openai)
    from rubricgym.judges.config import JudgeSettings, ResponseFormat  # optional: the judge extra

    if spec.kind == "endpoint":
        backend: Any = OpenAIChatBackend(JudgeSettings(
            base_url=spec.base_url, model=spec.model, api_key_env=spec.api_key_env, api_key_file=spec.api_key_file,
            response_format=ResponseFormat.NONE, timeout_s=spec.timeout_s, max_transport_retries=spec.max_retries,
            temperature=spec.temperature, seed=None))
    elif spec.kind == "adapter":
        model, tokenizer, label = trained_adapter(Path(str(spec.adapter)))
        backend = TransformersChatBackend(model, tokenizer, model_id=label)
    else:
        backend = TransformersChatBackend.from_loader(spec.local_model)

    def call_model(messages: list[dict[str, str]], env_id: str, task_id: str) -> Reply:
        request = ChatRequest(phase="policy", messages=messages, schema_name="policy", json_schema={},
                              max_tokens=spec.max_tokens, temperature=spec.temperature,
                              tools=[t.openai_schema() for t in tools])
        try:
            reply = backend.complete(request)
        except Exception as exc:  # classified transport failures, a local model's errors
            raise PolicyError(f"{type(exc).__name__}: {exc}") from exc
        return Reply(text=reply.text, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                     tool_calls=[(c.name, c.arguments) for c in reply.tool_calls])

    return call_model


def intact_checkpoint(run_dir: Path) -> Any:
    """The newest checkpoint of a run folder that verifies (pickle-free reader), else ValueError."""
    from rubricgym.trainers.checkpoint import newest_intact  # lazy CLI: torch and peft only for --adapter

    loaded, skipped = newest_intact(run_dir, move_aside=False)
    if loaded is None:
        why = "; ".join(skipped) or "no checkpoint in it"
        raise ValueError(f"--adapter {run_dir}: not a run folder with an intact checkpoint ({why})")
    return loaded


def trained_adapter(run_dir: Path) -> tuple[Any, Any, str]:
    """(model, tokenizer, label) of a training run: the base model its config names with the
    LoRA weights of its newest intact checkpoint, read by the pickle-free checkpoint reader
    (JSON state, safetensors tensors). Nothing in the run folder names code to import."""
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict  # the train extra

    from rubricgym.models import load_causal_lm
    from rubricgym.trainers.config import TrainConfig

    loaded = intact_checkpoint(run_dir)
    config = TrainConfig.model_validate(loaded.state.config)
    model, tokenizer = load_causal_lm(config.model.name, seed=config.run.seed)
    lora = LoraConfig(r=config.lora.r, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
                      target_modules=list(config.lora.target_modules), task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    result = set_peft_model_state_dict(model, loaded.adapter)
    if getattr(result, "unexpected_keys", None):
        raise ValueError(f"--adapter {run_dir}: its adapter does not fit {config.model.name!r} "
                         f"(unexpected keys {list(result.unexpected_keys)[:3]})")
    model.eval()
    return model, tokenizer, f"adapter:{run_dir.name}@{loaded.state.iteration}"


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
                      "rubric": {name: record for name, record in (info.get("rubric") or {}).items()},
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


def _start_worker(settings: EvalSettings, records: Any) -> None:
    """A worker process's envs (one per episode it plays at once) and policy, built once (the
    engine's process-wide state stays here); ``records`` is the queue its episodes' records go
    to. What fails to build is kept and becomes each episode's labelled outcome."""
    import gymnasium as gym  # lazy CLI: imported in the worker process that plays

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
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


def done_pairs(path: Path) -> set[tuple[str, int]]:
    if not path.is_file():
        return set()
    return {(str(r["task_id"]), int(r["sample"])) for _, r in iter_json_lines(path, what="an episode record")}


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan  # exact sum: the same in any order


def _over_tasks(by_task: dict[str, list[dict[str, Any]]], k: int, estimate: Callable[[int, int, int], float]) -> float:
    """pass@k or pass^k averaged over the tasks with at least k counted samples."""
    values = [estimate(len(rs), sum(r["success"] for r in rs), k) for rs in by_task.values() if len(rs) >= k]
    return _mean(values)


def summarize(records: Sequence[dict[str, Any]], settings: EvalSettings) -> dict[str, Any]:
    """Success with its Wilson 95% interval, pass@k (unbiased) and pass^k for every k up to K,
    returns (env and TRCA), the parsed-action rate, steps, tokens, cost, outcomes by label, a
    per-task table, and per step index the mean reward the rubric paid (positive) or charged
    (negative). Env failures are left out of every rate (they are the engine's, not the
    policy's); policy failures count as failures."""
    counted = [r for r in records if r["outcome"] != "env_error"]
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in counted:
        by_task[r["task_id"]].append(r)
    wins = sum(bool(r["success"]) for r in counted)
    ci = wilson_interval(wins, len(counted)) if counted else (math.nan, math.nan)
    steps = [s for r in counted for s in r["step_records"]]
    trca = [sum(s["trca_reward"] for s in r["step_records"]) for r in counted
            if r["step_records"] and all(s.get("trca_reward") is not None for s in r["step_records"])]
    most = max((len(rs) for rs in by_task.values()), default=0)
    by_step: dict[int, list[float]] = defaultdict(list)
    for r in counted:
        for t, step in enumerate(r["step_records"]):
            by_step[t].append(step["reward"] - step["env_reward"])
    prompt = sum(r["prompt_tokens"] for r in records)
    completion = sum(r["completion_tokens"] for r in records)
    return {
        "env_id": settings.env_id, "policy": settings.policy.model_dump(exclude={"api_key_file"}),
        "episodes": len(records), "counted": len(counted),
        "outcomes": {k: sum(1 for r in records if r["outcome"] == k) for k in
                     ("success", "failure", "truncated", "policy_error", "env_error")},
        "success_rate": wins / len(counted) if counted else math.nan,
        "success_ci95": list(ci),
        "pass_at": {str(k): _over_tasks(by_task, k, pass_at_k) for k in range(1, most + 1)},
        "pass_hat": {str(k): _over_tasks(by_task, k, pass_hat_k) for k in range(1, most + 1)},
        "env_return_mean": _mean([r["env_return"] for r in counted]),
        "trca_reward_mean": _mean(trca),
        "action_parsed_rate": _mean([float(s.get("parsed", s["accepted"])) for s in steps]),
        "steps_mean": _mean([r["steps"] for r in counted]),
        "per_task": {t: {"episodes": len(rs), "successes": sum(bool(r["success"]) for r in rs),
                         "success_rate": _mean([float(r["success"]) for r in rs]),
                         "env_return_mean": _mean([r["env_return"] for r in rs]),
                         "steps_mean": _mean([r["steps"] for r in rs])} for t, rs in sorted(by_task.items())},
        "errors_by_outcome": {k: sorted({str(r["error"])[:200] for r in records if r["outcome"] == k and r["error"]})
                              for k in ("policy_error", "env_error")},
        "mean_return": _mean([r["return"] for r in counted]),
        "rubric_reward_by_step": {str(t): sum(v) / len(v) for t, v in sorted(by_step.items())},
        "prompt_tokens": prompt, "completion_tokens": completion,
        "cost_usd": (prompt * settings.price_prompt_per_mtok + completion * settings.price_completion_per_mtok) / 1e6,
    }


def run_eval(settings: EvalSettings, progress: Callable[[dict[str, Any], int, int], None] | None = None) -> dict[str, Any]:
    # lazy: run_files loads the trainer's checkpoint code (torch, peft); the spawned workers
    # import this module for their episodes and need none of it
    from rubricgym.trainers.run_files import drop_partial_line, refuse_links_outside, write_run_file

    out = Path(settings.out)
    if out.exists():
        refuse_links_outside(out)
    out.mkdir(parents=True, exist_ok=True)
    episodes = out / EPISODES_FILE
    if episodes.exists() and not settings.resume:
        raise FileExistsError(f"{episodes} exists: pass --resume to continue it, or another --out")
    drop_partial_line(episodes)  # a record cut by a kill: its episode is played again
    done = done_pairs(episodes)
    jobs = [(task, sample, settings.seed + 1000 * sample + i) for i, task in enumerate(settings.tasks)
            for sample in range(settings.samples) if (task, sample) not in done]
    if jobs:
        _play(settings, jobs, episodes, progress)
    records = [r for _, r in iter_json_lines(episodes, what="an episode record")] if episodes.exists() else []
    records.sort(key=lambda r: (str(r["task_id"]), int(r["sample"])))  # file order depends on finishing order
    summary = summarize(records, settings)
    if settings.judge is not None:  # after every episode is in: a task's K samples are one group
        judged = judge_episodes(records, settings.judge, settings.env_id)
        write_run_file(out / JUDGE_FILE, "".join(json.dumps(line, default=str) + "\n" for line in judged.lines))
        summary["draco"] = judged.summary(settings.judge.variant)
        summary["draco"]["per_episode"] = judged.scores
    write_run_file(out / SUMMARY_FILE, json.dumps(summary, indent=2, default=str))
    return summary


def _play(settings: EvalSettings, jobs: list[tuple[str, int, int]], episodes: Path,
          progress: Callable[[dict[str, Any], int, int], None] | None) -> None:
    """Play ``jobs`` on the worker processes, a batch of ``episodes_per_worker`` per task, and
    append each record to ``episodes`` as it arrives (its episode has ended)."""
    from rubricgym.trainers.run_files import append_run_line  # lazy CLI: run_files loads torch (see run_eval)

    ctx = multiprocessing.get_context("spawn")  # torch and the engines are not fork-safe once loaded
    records: Any = ctx.Queue()
    size = settings.episodes_per_worker
    with ProcessPoolExecutor(max_workers=min(settings.worker_count, math.ceil(len(jobs) / size)), mp_context=ctx,
                             initializer=_start_worker, initargs=(settings, records)) as pool:
        batches = [pool.submit(_worker_batch, settings.env_id, jobs[i:i + size]) for i in range(0, len(jobs), size)]
        finished = 0
        try:
            while finished < len(jobs):
                try:
                    record = records.get(timeout=0.2)
                except queue.Empty:
                    for batch in batches:  # a worker that died, or a bug: the run stops with it
                        if batch.done() and batch.exception() is not None:
                            raise batch.exception()  # type: ignore[misc]
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


class EvalProgress:
    """A progress bar (stderr) with the running success rate, tokens and cost, and one line per
    finished episode (stdout)."""

    def __init__(self, settings: EvalSettings):
        self.settings = settings
        self.bar: Any = None
        self.counted = self.successes = self.prompt = self.completion = 0

    def __call__(self, record: dict[str, Any], finished: int, total: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, desc="eval", unit="episode", file=sys.stderr, dynamic_ncols=True)
        if record["outcome"] != "env_error":  # env failures are reported apart, as in the summary
            self.counted += 1
            self.successes += bool(record["success"])
        self.prompt += int(record["prompt_tokens"])
        self.completion += int(record["completion_tokens"])
        cost = (self.prompt * self.settings.price_prompt_per_mtok
                + self.completion * self.settings.price_completion_per_mtok) / 1e6
        tqdm.write(f"[{finished}/{total}] {record['task_id']} #{record['sample']}: {record['outcome']} "
                   f"return {record['return']:+.3f} in {record['steps']} steps", file=sys.stdout)
        self.bar.update(1)
        self.bar.set_postfix({"success": f"{self.successes / max(1, self.counted):.2f}",
                              "tokens": self.prompt + self.completion, "cost": f"${cost:.4f}"})

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"), help="compare two finished evals: "
                        "per-task differences and an exact McNemar test on their shared (task, sample) pairs")
    parser.add_argument("--env", dest="env_id", help="a registered env id")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of gym.make keyword arguments (e.g. a served "
                        "env: --env rubricgym/Remote-v0 --env-kwargs '{\"url\": \"http://127.0.0.1:8000\"}')")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tasks", help="comma-separated task ids")
    which.add_argument("--n", type=int, help="the env's first N tasks of the split")
    parser.add_argument("--split", choices=("train", "eval"), default="train", help="which tasks --n draws from")
    parser.add_argument("--samples", type=int, default=1, help="episodes per task (pass@k over them)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", choices=("endpoint", "local", "callable", "adapter"))
    parser.add_argument("--base-url", help="policy 'endpoint': OpenAI-compatible endpoint")
    parser.add_argument("--model", default="gpt-4o-mini", help="policy 'endpoint': the model name sent")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding the endpoint's key")
    parser.add_argument("--api-key-file", help="file whose first line is the endpoint's key")
    parser.add_argument("--callable", help="policy 'callable': module:function")
    parser.add_argument("--local-model", default="smollm2", help="policy 'local': smollm2, tiny or a model folder")
    parser.add_argument("--adapter", help="policy 'adapter': a training run folder (weights only, pickle-free)")
    parser.add_argument("--native-tools", action="store_true", help="policy 'endpoint': offer the benchmark's tool "
                        "surface (rubricgym.tool_surface) as function-calling tools=")
    parser.add_argument("--timeout", type=float, default=60.0, help="policy 'endpoint': seconds a call may take in all")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=256, help="response tokens per turn")
    parser.add_argument("--max-steps", type=int, help="steps per episode (default: the env's)")
    parser.add_argument("--concurrency", type=int, default=1, help="episodes in flight")
    parser.add_argument("--workers", type=int, help="worker processes (default: one per episode in flight; fewer: "
                        "each plays several episodes at once, their endpoint calls overlapping)")
    parser.add_argument("--out", default="runs/eval")
    parser.add_argument("--resume", action="store_true", help="continue OUT/episodes.jsonl")
    parser.add_argument("--price-prompt", type=float, default=0.0, help="USD per 1M prompt tokens")
    parser.add_argument("--price-completion", type=float, default=0.0, help="USD per 1M completion tokens")
    judge = parser.add_argument_group("--judge: DRACO verdicts on the episodes (the K samples of a task are one group)")
    judge.add_argument("--judge", action="store_true", help="score every task's samples with a DRACO judge")
    judge.add_argument("--judge-base-url", help="the judge's OpenAI-compatible endpoint")
    judge.add_argument("--judge-model", default="gpt-4o-mini", help="the judge model name sent")
    judge.add_argument("--judge-api-key-env", default="OPENAI_API_KEY", help="variable holding the judge's key")
    judge.add_argument("--judge-api-key-file", help="file whose first line is the judge's key")
    judge.add_argument("--judge-variant", default=DracoVariant.DYNAMIC_CREDIT.value,
                       help=f"one of {[v.value for v in DracoVariant]}")
    judge.add_argument("--judge-rubric", help="static rubric file (default: the benchmark's packaged one)")
    judge.add_argument("--judge-response-format", choices=("json_schema", "json_object_schema", "json_object", "none"),
                       default="json_schema", help="how the judge endpoint is asked for JSON")


def eval_judge(args: argparse.Namespace) -> EvalJudge | None:
    """The ``--judge*`` options as the judge's settings (None without ``--judge``)."""
    if not args.judge:
        return None
    if not args.judge_base_url:
        raise ValueError("--judge needs --judge-base-url (an OpenAI-compatible endpoint)")
    DracoVariant.parse(args.judge_variant)  # an unknown variant is refused before any episode
    settings = JudgeSettings(base_url=args.judge_base_url, model=args.judge_model, api_key_env=args.judge_api_key_env,
                             api_key_file=args.judge_api_key_file, response_format=args.judge_response_format)
    return EvalJudge(settings=settings, variant=args.judge_variant, rubric=args.judge_rubric)


def compare_runs(a_dir: Path, b_dir: Path) -> dict[str, Any]:
    """Two evals' episodes on their shared (task, sample) pairs: success of each, per-task
    differences, and the exact McNemar test on the discordant pairs (env failures left out)."""
    runs = []
    for folder in (a_dir, b_dir):
        path = Path(folder) / EPISODES_FILE
        if not path.is_file():
            raise ValueError(f"--compare: {path} does not exist (a finished rubricgym eval's folder is needed)")
        runs.append({(str(r["task_id"]), int(r["sample"])): r for _, r in iter_json_lines(path, what="an episode record")
                     if r["outcome"] != "env_error"})
    shared = sorted(set(runs[0]) & set(runs[1]))
    if not shared:
        raise ValueError("--compare: the two evals share no (task, sample) pair without an env failure")
    a_wins = [bool(runs[0][p]["success"]) for p in shared]
    b_wins = [bool(runs[1][p]["success"]) for p in shared]
    only_a = sum(a and not b for a, b in zip(a_wins, b_wins, strict=True))
    only_b = sum(b and not a for a, b in zip(a_wins, b_wins, strict=True))
    per_task: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for pair, a, b in zip(shared, a_wins, b_wins, strict=True):
        per_task[pair[0]].append((a, b))
    return {"a": str(a_dir), "b": str(b_dir), "pairs": len(shared), "success_a": _mean([float(x) for x in a_wins]),
            "success_b": _mean([float(x) for x in b_wins]), "only_a": only_a, "only_b": only_b,
            "mcnemar_p": mcnemar_exact(only_a, only_b),
            "per_task": {t: {"pairs": len(v), "success_a": _mean([float(a) for a, _ in v]),
                             "success_b": _mean([float(b) for _, b in v]),
                             "difference": _mean([float(b) - float(a) for a, b in v])} for t, v in sorted(per_task.items())}}


def print_comparison(result: dict[str, Any]) -> None:
    print(f"{'task':40s} {'pairs':>5s} {'A':>6s} {'B':>6s} {'B-A':>6s}")
    for task, row in result["per_task"].items():
        print(f"{task[:40]:40s} {row['pairs']:5d} {row['success_a']:6.2f} {row['success_b']:6.2f} {row['difference']:+6.2f}")
    print(f"{result['pairs']} shared pairs: success A {result['success_a']:.3f}, B {result['success_b']:.3f}; "
          f"only A {result['only_a']}, only B {result['only_b']}; exact McNemar p = {result['mcnemar_p']:.4g}")


def run(args: argparse.Namespace) -> int:
    if args.compare:
        try:
            print_comparison(compare_runs(Path(args.compare[0]), Path(args.compare[1])))
        except (OSError, ValueError, KeyError) as exc:  # folders and records are untrusted input
            print(f"rubricgym eval: {exc}", file=sys.stderr)
            return 2
        return 0
    if not args.env_id or not args.policy:
        print("rubricgym eval: --env and --policy are required (or --compare DIR_A DIR_B)", file=sys.stderr)
        return 2
    try:
        env_id = check_env_id(args.env_id)
        env_kwargs = json.loads(args.env_kwargs)
        if not isinstance(env_kwargs, dict):
            raise ValueError(f"--env-kwargs must be a JSON object, got {args.env_kwargs!r}")
        refuse_inline_secrets(env_kwargs, "--env-kwargs")
        if args.tasks:
            tasks = [t for t in args.tasks.split(",") if t]
        else:
            available = list(task_ids(env_id, split=args.split, **env_kwargs))
            tasks = available[: args.n] if args.n else available
        settings = EvalSettings(
            env_id=env_id, env_kwargs=env_kwargs, tasks=tasks, samples=args.samples, seed=args.seed, concurrency=args.concurrency, workers=args.workers,
            max_steps=args.max_steps, out=args.out, resume=args.resume, price_prompt_per_mtok=args.price_prompt,
            price_completion_per_mtok=args.price_completion,
            policy=PolicySpec(kind=args.policy, base_url=args.base_url, model=args.model, api_key_env=args.api_key_env,
                              api_key_file=args.api_key_file, callable=args.callable, local_model=args.local_model,
                              adapter=args.adapter, native_tools=args.native_tools, timeout_s=args.timeout,
                              temperature=args.temperature, max_tokens=args.max_tokens),
            judge=eval_judge(args))
        if settings.policy.native_tools:
            tool_surface(env_id, **env_kwargs)  # a benchmark without a tool surface is refused here
        if settings.policy.kind == "adapter":
            intact_checkpoint(Path(str(settings.policy.adapter)))  # refused here, not in every worker
    except (ValueError, LookupError) as exc:  # bad settings, an unknown env id (with the nearest ids)
        print(f"rubricgym eval: {exc}", file=sys.stderr)
        return 2

    progress = EvalProgress(settings)
    try:
        summary = run_eval(settings, progress)
    except FileExistsError as exc:
        print(f"rubricgym eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rubricgym eval: interrupted; the finished episodes are in {Path(settings.out) / EPISODES_FILE} "
              "(--resume plays the rest)", file=sys.stderr)
        return 130
    finally:
        progress.close()
    most = str(max((int(k) for k in summary["pass_at"]), default=1))
    print(f"success {summary['success_rate']:.3f} over {summary['counted']} episodes (pass@{most} "
          f"{summary['pass_at'].get(most, math.nan):.3f}); outcomes {summary['outcomes']}; tokens {summary['prompt_tokens']}+"
          f"{summary['completion_tokens']}; results: {Path(settings.out) / EPISODES_FILE}, {SUMMARY_FILE}")
    return 0
