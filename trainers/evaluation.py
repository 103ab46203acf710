"""Held-out evaluation: the benchmark's eval tasks, greedy decoding, every game in one batch.

The training tasks' own rollouts say how well the policy fits what it is trained on; tasks
that are never demonstrated nor trained on say whether it learned to play. Which tasks those
are comes from the benchmark's spec (``EnvIdSpec.eval_id``) or the config, never from this
module. All games advance together: one generate call per turn over the active episodes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from rubricgym.records import step_records
from rubricgym.registration import UnknownBenchmark, get_spec
from rubricgym.trainers.config import EnvSettings, TrainConfig
from rubricgym.trainers.parallel.base import GenerateLockstep
from rubricgym.trainers.generation import HFGenerator
from rubricgym.trainers.rollout import Rollout, RolloutCollector, StepSample, available_tasks, make_env_factory
from rubricgym.trainers.run_files import write_run_file
from rubricgym.trainers.statistics import Z95, wilson_interval  # noqa: F401  (Z95: re-exported)
from rubricgym.trainers.update import collate, response_logprobs

log = logging.getLogger(__name__)

RESULT_KEYS = ("episodes", "successes", "success_rate", "success_ci95_low", "success_ci95_high",
               "trca_reward_mean", "return_mean", "action_parsed_rate", "steps_mean", "time_s")


def distinct_group_share(groups: Sequence[Sequence[Rollout]]) -> float:
    """Share of groups (of two or more rollouts) whose rollouts did not all produce the same
    responses: a group of identical rollouts gives GRPO/TRCA nothing to compare."""
    compared = [g for g in groups if len(g) >= 2]
    if not compared:
        return 0.0
    distinct = 0
    for group in compared:
        seen = {tuple(tuple(s.response_ids) for s in r.steps) for r in group}
        distinct += len(seen) > 1
    return distinct / len(compared)


class TaskResult(BaseModel):
    task_id: str
    seed: int
    success: bool
    steps: int
    trca_reward_mean: float | None = None
    action_parsed_rate: float
    error: str | None = None


class EvalResult(BaseModel):
    """One evaluation of the policy on the plan's tasks."""

    label: str
    split: str
    held_out: bool
    decoding: str
    episodes: int
    successes: int
    success_rate: float
    success_ci95_low: float
    success_ci95_high: float
    trca_reward_mean: float | None = Field(None, description="mean r_TRCA per step (None: no TRCA wrapper)")
    return_mean: float
    action_parsed_rate: float = Field(description="share of steps whose response had a parseable action")
    steps_mean: float
    time_s: float
    tasks: list[TaskResult]

    def metrics(self) -> dict[str, Any]:
        """The flat numbers (metrics lines, the run summary)."""
        data = self.model_dump()
        out = {k: data[k] for k in RESULT_KEYS if data.get(k) is not None}
        out.update({"split": self.split, "held_out": self.held_out, "decoding": self.decoding})
        return out


class EvalPlan(BaseModel):
    """Which tasks are evaluated, where, and with which reset seeds."""

    env_id: str | None = Field(description="the held-out env id (None: the training env)")
    split: str
    held_out: bool
    tasks: list[tuple[str, int]]


def held_out_env_id(config: TrainConfig) -> str | None:
    """The configured eval env id, else the one the benchmark's spec pairs with ``env.id``."""
    if config.evaluation.env_id:
        return config.evaluation.env_id
    if config.env.factory or config.env.url:  # a served env plays one env id: no held-out pair there
        return None
    try:
        spec = get_spec(config.env.id)
        return spec.env_id(config.env.id).eval_id
    except (UnknownBenchmark, KeyError):
        return None


def eval_env_settings(config: TrainConfig, env_id: str) -> EnvSettings:
    """The training env's settings (kwargs, step budget) on the held-out id; ``evaluation.env_kwargs``,
    when set, replaces the kwargs (train on generated games, evaluate on the bundled ones)."""
    kwargs = config.env.kwargs if config.evaluation.env_kwargs is None else config.evaluation.env_kwargs
    return EnvSettings(id=env_id, kwargs=dict(kwargs), max_steps=config.env.max_steps)


def plan_evaluation(config: TrainConfig, seed_of: Callable[[int], int],
                    fallback: Callable[[], list[tuple[str, int]]], env: Any = None,
                    train_tasks: Sequence[str] = ()) -> EvalPlan:
    """Resolve the eval tasks. ``env``: an instance of the held-out env (to list its tasks);
    ``fallback``: the training tasks used when the benchmark declares no held-out split;
    ``train_tasks``: the run's training task ids (an eval split sharing one is not held out)."""
    settings = config.evaluation
    env_id = held_out_env_id(config)
    if env_id is None:
        tasks = fallback()
        if settings.tasks:
            tasks = [(t, seed_of(k)) for k, t in enumerate(settings.tasks)]
        if settings.num_tasks:
            tasks = tasks[: settings.num_tasks]
        return EvalPlan(env_id=None, split="train tasks of RL iteration 1 (no held-out split declared)",
                        held_out=False, tasks=tasks)
    names = available_tasks(env, EnvSettings(id=env_id, tasks=settings.tasks, num_tasks=settings.num_tasks))
    tasks = [(t, seed_of(k)) for k, t in enumerate(names)]
    shared = sorted(set(names) & set(train_tasks))
    if shared:  # e.g. the same data file passed to both ids: say so, never call it held out
        log.warning("the evaluation tasks of %s include %d training task(s) (%s): not held out", env_id,
                    len(shared), ", ".join(shared[:3]))
        return EvalPlan(env_id=env_id, held_out=False, tasks=tasks,
                        split=f"{env_id}, NOT held out: {len(shared)} of its {len(names)} tasks are training tasks")
    return EvalPlan(env_id=env_id, split=f"held out: {env_id}", held_out=True, tasks=tasks)


def summarize(label: str, plan: EvalPlan, decoding: str, rollouts: Sequence[Rollout], seconds: float) -> EvalResult:
    """Success with its Wilson interval, mean r_TRCA per step, parsed-action rate, steps."""
    if not rollouts:
        raise ValueError("an evaluation needs at least one task")
    per_task = []
    for r in rollouts:
        trca = [_trca(s) for s in r.steps if _trca(s) is not None]
        parsed = [s.action_tokens is not None for s in r.steps]
        per_task.append(TaskResult(task_id=r.task_id, seed=r.seed, success=r.success, steps=len(r.steps),
                                   trca_reward_mean=float(np.mean(trca)) if trca else None,
                                   action_parsed_rate=float(np.mean(parsed)) if parsed else 0.0, error=r.error))
    steps = [s for r in rollouts for s in r.steps]
    trca_all = [v for v in (_trca(s) for s in steps) if v is not None]
    wins = sum(t.success for t in per_task)
    low, high = wilson_interval(wins, len(per_task))
    return EvalResult(
        label=label, split=plan.split, held_out=plan.held_out, decoding=decoding, episodes=len(per_task),
        successes=wins, success_rate=wins / len(per_task), success_ci95_low=low, success_ci95_high=high,
        trca_reward_mean=float(np.mean(trca_all)) if trca_all else None,
        return_mean=float(np.mean([r.reward_return for r in rollouts])),
        action_parsed_rate=float(np.mean([s.action_tokens is not None for s in steps])) if steps else 0.0,
        steps_mean=float(np.mean([len(r.steps) for r in rollouts])), time_s=seconds, tasks=per_task)


def _trca(step: StepSample) -> float | None:
    record = step_records(step).trca()
    return record.r_TRCA if record is not None else None


class Evaluator:
    """Owns the eval envs (one per task, built on first use) and a greedy generator on the
    live training model."""

    def __init__(self, config: TrainConfig, plan: EvalPlan, env_fn: Callable[[], Any], model: Any, tokenizer: Any,
                 lockstep: GenerateLockstep | None = None):
        self.config = config
        self.plan = plan
        self.max_steps = (eval_env_settings(config, plan.env_id) if plan.env_id else config.env).step_budget()[0]
        self.collector = RolloutCollector(env_fn, tokenizer, config.prompt, self.max_steps)
        self.greedy = config.evaluation.greedy
        self.generator = HFGenerator(model, tokenizer, config.generation, greedy=self.greedy, lockstep=lockstep)
        self.last_rollouts: list[Rollout] = []

    @property
    def decoding(self) -> str:
        return "greedy" if self.greedy else f"sampled (temperature {self.config.generation.temperature})"

    def run(self, label: str, sample_seed: int = 0, progress: bool = False) -> EvalResult:
        """Every task once, all episodes stepped together (one generate call per turn)."""
        torch.manual_seed(sample_seed)  # only matters when sampling
        bar = None
        if progress:
            bar = tqdm(total=self.max_steps, desc=f"eval {label}", unit="turn", dynamic_ncols=True,
                       leave=False)

        def tick(turn: int, active: int) -> None:
            if bar is not None:
                bar.update(1)
                bar.set_postfix({"playing": active})

        started = time.perf_counter()
        try:
            groups = self.collector.collect(self.generator, self.plan.tasks, 1, progress=tick)
        finally:
            if bar is not None:
                bar.close()
        self.last_rollouts = [r for g in groups for r in g]
        return summarize(label, self.plan, self.decoding, self.last_rollouts, time.perf_counter() - started)

    def save_trajectories(self, path: Path) -> None:
        """The last evaluation's episodes (what the policy did on each task), as JSONL."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_run_file(path, "".join(r.trajectory.to_json_line() + "\n" for r in self.last_rollouts
                                     if r.trajectory is not None))

    def close(self) -> None:
        self.collector.close()


def build_evaluator(config: TrainConfig, model: Any, tokenizer: Any, seed_of: Callable[[int], int],
                    fallback: Callable[[], list[tuple[str, int]]],
                    train_env_fn: Callable[[], Any], train_tasks: Sequence[str] = (),
                    lockstep: GenerateLockstep | None = None) -> Evaluator:
    """The held-out plan and its evaluator (the training env factory when nothing is held out);
    an eval split that shares a task with ``train_tasks`` is reported as not held out."""
    env_id = held_out_env_id(config)
    env_fn = make_env_factory(eval_env_settings(config, env_id)) if env_id else train_env_fn
    probe = env_fn() if env_id else None
    try:
        plan = plan_evaluation(config, seed_of, fallback, probe, train_tasks)
    finally:
        if probe is not None:
            probe.close()
    return Evaluator(config, plan, env_fn, model, tokenizer, lockstep)


@torch.no_grad()
def policy_entropy(model: Any, samples: Sequence[StepSample], pad_id: int, temperature: float = 1.0,
                   micro_batch_size: int = 4) -> float:
    """Mean entropy (nats) of the policy's next-token distributions over the response tokens
    of ``samples``: near 0, every sampled rollout of a group comes out the same."""
    samples = [s for s in samples if s.response_ids]
    if not samples:
        return 0.0
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0.0
    try:
        for k in range(0, len(samples), micro_batch_size):
            chunk = [StepSample(prompt_ids=s.prompt_ids, response_ids=s.response_ids, response_text=s.response_text,
                                reasoning_tokens=None, action_tokens=None, reward=0.0, env_reward=0.0,
                                token_advantages=[0.0] * len(s.response_ids), loss_mask=[True] * len(s.response_ids))
                     for s in samples[k : k + micro_batch_size]]
            batch = collate(chunk, pad_id, device)
            _, entropy = response_logprobs(model, batch, temperature, with_entropy=True)
            mask = batch.loss_mask.float()
            total += float((entropy * mask).sum())
            count += float(mask.sum())
    finally:
        if was_training:
            model.train()
    return total / max(count, 1.0)
