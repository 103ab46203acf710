"""Multi-turn rollouts: G rollouts per task from identical initial states, in lockstep.

All rollouts of a batch (tasks x G) advance together: at every turn the prompts of the
still-running rollouts go to the generator as one batch, then each response is stepped in
its own env. Every step keeps the exact prompt and response token ids the policy saw and
sampled, plus the token spans of its reasoning and its action.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import gymnasium as gym

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.contract import Trajectory, Transition
from rubricgym.env_factories import env_factory
from rubricgym.json_worker import close_each
from rubricgym.prompts import EpisodeView, PromptSettings, render_prompt
from rubricgym.registration import check_env_id
from rubricgym.remote import REMOTE_ENV_ID
from rubricgym.trainers.config import EnvSettings
from rubricgym.tokens import Span, decode_response, response_token_spans

if TYPE_CHECKING:  # torch: an env worker imports this module and needs no model
    from rubricgym.trainers.generation import Generator

log = logging.getLogger(__name__)


@dataclass
class StepSample:
    """One policy decision: the tokens trained on, and where reasoning and action are."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_text: str
    reasoning_tokens: Span | None
    action_tokens: Span | None
    reward: float  # the env's step reward (r_TRCA when the TRCA wrapper is attached)
    env_reward: float  # the engine's own reward (the sparse outcome signal)
    context_key: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # {"rubric": {component: record}} of the step
    anchor: str | None = None  # the observation the step acted on (GiGPO's anchor state)
    # filled by the advantage estimator: one value per response token, and which tokens count
    token_advantages: list[float] | None = None
    loss_mask: list[bool] | None = None
    # which rollout of the iteration the step belongs to, and how many steps it has (T_i):
    # the loss aggregation 1/N sum_i 1/T_i sum_t reads them
    rollout_index: int = 0
    rollout_steps: int = 1

    @property
    def response_length(self) -> int:
        """The step's response tokens (what DRACO's a_j divides by)."""
        return len(self.response_ids)


@dataclass
class Rollout:
    task_id: str
    seed: int
    group: int  # index of its task in the batch
    member: int  # index within the group
    steps: list[StepSample] = field(default_factory=list)
    trajectory: Trajectory | None = None
    error: str | None = None
    judge: dict[str, Any] | None = None  # a DRACO judge's record of this rollout (GroupResult.rollout_record)

    def samples(self, index: int) -> list[StepSample]:
        """Its steps, labelled as rollout ``index`` of the iteration with T_i = its length."""
        for step in self.steps:
            step.rollout_index, step.rollout_steps = index, len(self.steps)
        return self.steps

    @property
    def env_return(self) -> float:
        return sum(s.env_reward for s in self.steps)

    @property
    def reward_return(self) -> float:
        return sum(s.reward for s in self.steps)

    @property
    def success(self) -> bool:
        if self.trajectory is not None and self.trajectory.outcome.success is not None:
            return bool(self.trajectory.outcome.success)
        return self.env_return > 0


def make_env_factory(settings: EnvSettings) -> Callable[[], gym.Env]:
    """A zero-argument env constructor from the config (a gym id, or a registered factory's name)."""
    if settings.factory:
        fn = env_factory(settings.factory)
        return lambda: fn(max_steps=settings.max_steps, **settings.kwargs)
    if settings.url:  # served: the server made the env with its own kwargs and budget
        return lambda: gym.make(REMOTE_ENV_ID, url=settings.url, env_id=settings.id)
    check_env_id(settings.id)
    return lambda: gym.make(settings.id, max_steps=settings.max_steps, **settings.kwargs)


def available_tasks(env: gym.Env, settings: EnvSettings) -> list[str]:
    if settings.tasks:
        tasks = list(settings.tasks)
    else:
        adapter = getattr(env.unwrapped, "adapter", None)
        if adapter is None:  # a served env says what it plays at its first reset
            env.reset()
            adapter = getattr(env.unwrapped, "adapter", None)
        if adapter is None:
            raise ValueError("this env exposes no adapter.task_ids(): set env.tasks in the config")
        tasks = list(adapter.task_ids())
    if settings.num_tasks:
        tasks = tasks[: settings.num_tasks]
    if not tasks:
        raise ValueError("no tasks to train on")
    return tasks


@dataclass(frozen=True)
class ResetJob:
    """Reset env slot ``slot`` to task ``task_id`` with env seed ``seed``."""

    slot: int
    task_id: str
    seed: int


@dataclass
class SlotAnswer:
    """What one env slot answered to a reset or a step: what ``env.reset`` / ``env.step``
    return, or ``failure``, the label of an env that failed (not the policy's doing: the
    env's own failure attribution already made those observations); the rollout ends there."""

    observation: str = ""
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None


class EnvSlots(Protocol):
    """Where a collector's envs live, one env per slot: in this process (``LocalEnvSlots``) or
    in env workers (trainers/env_workers.py). A slot's env exposes ``unwrapped.adapter`` and,
    once an episode ends or fails, ``unwrapped.trajectory``."""

    def env(self, slot: int) -> Any: ...

    def reset(self, jobs: Sequence[ResetJob]) -> list[SlotAnswer]: ...

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[SlotAnswer]: ...

    def close(self) -> None: ...


class LocalEnvSlots:
    """Envs in this process, made on demand and stepped one after the other."""

    def __init__(self, env_fn: Callable[[], gym.Env], first: gym.Env | None = None):
        self.env_fn = env_fn
        self.envs: list[gym.Env] = [first] if first is not None else []

    def env(self, slot: int) -> gym.Env:
        while len(self.envs) <= slot:
            self.envs.append(self.env_fn())
        return self.envs[slot]

    def reset(self, jobs: Sequence[ResetJob]) -> list[SlotAnswer]:
        answers = []
        for job in jobs:
            obs, info = self.env(job.slot).reset(seed=job.seed, options={"task_id": job.task_id})
            answers.append(SlotAnswer(observation=obs, info=info))
        return answers

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[SlotAnswer]:
        answers = []
        for slot, action in zip(slots, actions, strict=True):
            try:
                obs, reward, terminated, truncated, info = self.env(slot).step(action)
            except Exception as exc:  # a broken env ends this rollout, recorded; the run goes on
                log.exception("env.step failed in slot %d", slot)
                answers.append(SlotAnswer(failure=f"{type(exc).__name__}: {exc}"))
                continue
            answers.append(SlotAnswer(obs, float(reward), bool(terminated), bool(truncated), info))
        return answers

    def close(self) -> None:
        close_each(self.envs, "this process")
        self.envs = []


@dataclass
class _Live:
    rollout: Rollout
    slot: int
    env: Any
    view: EpisodeView
    done: bool = False


@dataclass
class RolloutTimings:
    generation: float = 0.0
    environment: float = 0.0
    tokenization: float = 0.0
    prompt_tokens: int = 0
    response_tokens: int = 0


class RolloutCollector:
    """Runs lockstep episodes over a set of env slots (one per concurrent rollout): ``envs`` is
    an ``EnvSlots``, or a zero-argument env constructor for envs in this process."""

    def __init__(self, envs: EnvSlots | Callable[[], gym.Env], tokenizer: Any, prompt: PromptSettings,
                 max_steps: int):
        self.slots: EnvSlots = LocalEnvSlots(envs) if callable(envs) else envs
        self.tokenizer = tokenizer
        self.prompt = prompt
        self.max_steps = max_steps

    def env(self, k: int) -> Any:
        return self.slots.env(k)

    def close(self) -> None:
        self.slots.close()

    def collect(self, generator: Generator, tasks: Sequence[tuple[str, int]], group_size: int,
                timings: RolloutTimings | None = None,
                progress: Callable[[int, int], None] | None = None) -> list[list[Rollout]]:
        """One group of ``group_size`` rollouts per ``(task_id, seed)``; ``progress(turn, active)``
        is called after each turn (progress bars)."""
        timings = timings or RolloutTimings()
        t0 = time.perf_counter()
        jobs = [(task_id, seed, g, m) for g, (task_id, seed) in enumerate(tasks) for m in range(group_size)]
        live = self._start_all(jobs)
        timings.environment += time.perf_counter() - t0

        for turn in range(self.max_steps):
            active = [x for x in live if not x.done]
            if not active:
                break
            t0 = time.perf_counter()
            prompts = [render_prompt(self.tokenizer, x.view, self.prompt) for x in active]
            timings.tokenization += time.perf_counter() - t0
            t0 = time.perf_counter()
            responses = generator.generate(prompts)
            timings.generation += time.perf_counter() - t0
            timings.prompt_tokens += sum(len(p) for p in prompts)
            timings.response_tokens += sum(len(r) for r in responses)
            self._step_all(active, prompts, responses, timings)
            if progress is not None:
                progress(turn + 1, sum(not x.done for x in live))
        finish = getattr(generator, "finish", None)
        if finish is not None:  # e.g. ranks in lockstep: wait in step for the other ranks' rollouts
            finish()
        for x in live:
            if not x.done:  # a foreign env that ignores the step budget
                x.done = True
                x.rollout.trajectory = getattr(x.env.unwrapped, "trajectory", None)
        groups: list[list[Rollout]] = [[] for _ in tasks]
        for x in live:
            groups[x.rollout.group].append(x.rollout)
        return groups

    def _start_all(self, jobs: Sequence[tuple[str, int, int, int]]) -> list[_Live]:
        """Reset one env slot per ``(task_id, seed, group, member)``, in order."""
        answers = self.slots.reset([ResetJob(k, task_id, seed) for k, (task_id, seed, _, _) in enumerate(jobs)])
        live: list[_Live] = []
        for k, ((task_id, seed, g, m), answer) in enumerate(zip(jobs, answers, strict=True)):
            env = self.slots.env(k)
            x = _Live(Rollout(task_id=task_id, seed=seed, group=g, member=m), k, env,
                      EpisodeView.start(env, answer.observation, answer.info))
            if answer.failure is not None:
                self._fail(x, answer.failure)
            live.append(x)
        return live

    def _step_all(self, active: Sequence[_Live], prompts: Sequence[list[int]], responses: Sequence[list[int]],
                  timings: RolloutTimings) -> None:
        """Step every active rollout with its response (the slots decide how: in turn, or concurrently)."""
        if len(responses) != len(active) or len(prompts) != len(active):
            raise ValueError(f"{len(active)} active rollouts but {len(prompts)} prompts / {len(responses)} responses")
        t0 = time.perf_counter()
        texts = [decode_response(self.tokenizer, r) for r in responses]
        timings.tokenization += time.perf_counter() - t0
        t0 = time.perf_counter()
        answers = self.slots.step([x.slot for x in active], texts)
        timings.environment += time.perf_counter() - t0
        for x, prompt_ids, response_ids, text, answer in zip(active, prompts, responses, texts, answers, strict=True):
            if answer.failure is not None:
                self._fail(x, answer.failure)
                continue
            self._record(x, prompt_ids, response_ids, text, answer.observation, answer.reward, answer.terminated,
                         answer.truncated, answer.info, timings)

    @staticmethod
    def _fail(x: _Live, failure: str) -> None:
        """End the rollout as a labelled env failure, with the trajectory its env kept."""
        x.rollout.error = failure
        x.done = True
        x.rollout.trajectory = getattr(x.env.unwrapped, "trajectory", None)
        log.warning("rollout of task %s ended: %s", x.rollout.task_id, failure)

    def _record(self, x: _Live, prompt_ids: list[int], response_ids: list[int], text: str, obs: str,
                reward: float, terminated: bool, truncated: bool, info: dict[str, Any],
                timings: RolloutTimings) -> None:
        """Keep one stepped response as a ``StepSample`` and advance the rollout's view."""
        transition: Transition | None = info.get("transition")
        parsed = transition.action if transition is not None else None
        t0 = time.perf_counter()
        reasoning, action = response_token_spans(
            self.tokenizer, response_ids, text,
            parsed.reasoning_span if parsed else None, parsed.action_span if parsed else None,
        )
        timings.tokenization += time.perf_counter() - t0
        extra = {"rubric": info["rubric"]} if "rubric" in info else {}  # every reward component's record
        x.rollout.steps.append(StepSample(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_text=text,
            reasoning_tokens=reasoning,
            action_tokens=action,
            reward=float(reward),
            env_reward=float(transition.env_reward) if transition is not None else float(reward),
            context_key=transition.context_key if transition is not None else "",
            info=extra,
            anchor=x.view.observation,
        ))
        x.view.record(text, obs, info)
        if terminated or truncated:
            x.done = True
            x.rollout.trajectory = getattr(x.env.unwrapped, "trajectory", None)
            if x.rollout.trajectory is not None:
                x.rollout.trajectory = x.rollout.trajectory.model_copy(deep=True)
