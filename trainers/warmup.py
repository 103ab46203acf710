"""Format warm-up: behaviour cloning on expert demonstrations before RL.

A small model that never emits a parseable ``<action>`` block gives RL nothing to train
(TRCA credits action tokens only). The warm start replays the benchmark's expert plan
(the expert player its benchmark spec declares) through a real env, builds the prompt the trainer
itself would show at each step, and trains LoRA with cross-entropy on the response tokens
only. Demonstrations change only the initial policy: they are played in a separate env
instance that is closed afterwards, and no demonstration step reaches the RL batches,
rewards or credit.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from tqdm.auto import tqdm

from rubricgym.benchmark import ExpertPlayer
from rubricgym.parsing import ACTION_GRAMMAR, ExpertAction, TagGrammar
from rubricgym.prompts import EpisodeView, PromptSettings, render_prompt
from rubricgym.registration import expert_of, get_spec
from rubricgym.trainers.config import DemonstrationReasoning, WarmupSettings
from rubricgym.trainers.rollout import StepSample
from rubricgym.trainers.parallel.base import norm_value
from rubricgym.trainers.update import collate, micro_batches, response_logprobs

log = logging.getLogger(__name__)


DemonstrationSource = Literal["plan", "recovery", "visited"]
"""Where a demonstration's state came from: the expert's own plan; a step after a random detour
(``collect_demonstrations(recoveries=...)``); or a state the policy reached on its own, labelled
by the expert (``label_visited_states``)."""


@dataclass
class Demonstration:
    task_id: str
    step: int
    prompt_ids: list[int]
    response_ids: list[int]
    response_text: str
    source: DemonstrationSource = "plan"


def demonstration_response(action: str | ExpertAction, grammar: TagGrammar = ACTION_GRAMMAR,
                           task: str | None = None) -> str:
    """A short reasoning, then the expert's action, in the env's grammar. Short on purpose: on a
    CPU every generated token of every step costs a decoding pass, and the choice the policy
    explores is the action, not the template around it. ``task`` (the instruction) opens the
    reasoning when given."""
    act = ExpertAction.of(action)
    opening = f"My task is to: {task.strip()} " if task and task.strip() else ""
    return grammar.render(act, reasoning=f"{opening}I should {act.content}.")


def collect_demonstrations(env_fn: Callable[[], Any], tokenizer: Any, prompt: PromptSettings,
                           tasks: Sequence[str], seed: int, stop_ids: Sequence[int] = (),
                           progress: bool = False, recoveries: int = 0,
                           reasoning: DemonstrationReasoning = "action") -> list[Demonstration]:
    """Replay each task's expert plan through a fresh env; one demonstration per accepted step.

    Steps run until the plan ends or the env's own budget stops the episode, so prompts are
    exactly those the policy sees in RL (same builder, same history window).

    ``recoveries`` > 0 plays each game that many more times with one detour (noise injection,
    as DART: Laskey et al., 2017): the plan up to a random step, then a random other admissible
    action, then the expert's plan from *there*; the steps after the detour are the
    demonstrations (the prefix would repeat the plain replay's prompts). A policy cloned from
    plans alone has never seen a state off the plan, so after a wrong guess on an unseen game it
    has no action that recovers, and loops. Needs an expert that replans mid-episode
    (``BenchmarkSpec.expert_replans``). ``reasoning``: see ``DemonstrationReasoning``."""
    env = env_fn()
    expert, adapter = _expert(env, f"warmup.recoveries={recoveries}" if recoveries else None)
    rng = random.Random(seed)
    demos: list[Demonstration] = []
    bar = _bar(len(tasks), "demonstrations", "game") if progress else None
    try:
        for k, task_id in enumerate(tasks):
            if bar is not None:
                bar.update(1)
            replay = _Replay(env, adapter, tokenizer, prompt, stop_ids, task_id, seed + k, reasoning)
            plan = list(expert(adapter))
            replay.play(plan, demos)
            for _ in range(recoveries if plan else 0):
                replay = _Replay(env, adapter, tokenizer, prompt, stop_ids, task_id, seed + k, reasoning)
                detour_at = rng.randrange(len(plan))
                if not replay.play(plan[:detour_at], None):
                    continue
                planned = ExpertAction.of(plan[detour_at]).content
                others = [a for a in replay.view.admissible_actions or [] if a != planned]
                if others and replay.play([rng.choice(others)], None):
                    replay.play(list(expert(adapter)), demos, source="recovery")
    finally:
        env.close()
        if bar is not None:
            bar.close()
    return demos


def label_visited_states(env_fn: Callable[[], Any], tokenizer: Any, prompt: PromptSettings,
                         episodes: Sequence[tuple[str, int, Sequence[str]]], stop_ids: Sequence[int] = (),
                         progress: bool = False, reasoning: DemonstrationReasoning = "action") -> list[Demonstration]:
    """DAgger's labels (Ross, Gordon and Bagnell, 2011): the expert's next action at every state
    the policy itself reached.

    Each episode ``(task_id, seed, responses)`` is replayed in a fresh env with the policy's own
    responses (malformed ones too: they are part of the state the prompt shows); before each of
    them the expert plans from the current state and its first command becomes a
    demonstration for that prompt. Plans alone (and one random detour) never show the states a
    cloned policy drifts into on its own, such as holding the object it keeps putting back;
    these do. Needs an expert that replans (``BenchmarkSpec.expert_replans``)."""
    env = env_fn()
    expert, adapter = _expert(env, "warmup.dagger_rounds")
    demos: list[Demonstration] = []
    bar = _bar(len(episodes), "expert labels", "episode") if progress else None
    try:
        for task_id, seed, responses in episodes:
            if bar is not None:
                bar.update(1)
            replay = _Replay(env, adapter, tokenizer, prompt, stop_ids, task_id, seed, reasoning)
            for response in responses:
                plan = list(expert(adapter))
                if plan:
                    replay.record(replay.response(plan[0]), demos, source="visited")
                if not replay.follow(response):
                    break
    finally:
        env.close()
        if bar is not None:
            bar.close()
    return demos


def _expert(env: Any, replanning_for: str | None) -> tuple[ExpertPlayer, Any]:
    """The env's expert player and its adapter; ``replanning_for`` names the setting that needs
    the expert to plan from a mid-episode state. Closes ``env`` before refusing."""
    found = expert_of(env)
    if found is None:
        env.close()
        raise ValueError("warmup.enabled=true, but this env's benchmark declares no expert player to learn from")
    if replanning_for and not get_spec(found[1].benchmark).expert_replans:
        env.close()
        raise ValueError(f"{replanning_for} needs an expert that plans from a mid-episode state; this env's benchmark "
                         f"does not declare one (BenchmarkSpec.expert_replans). Fix: {replanning_for.split('=')[0]}=0")
    return found


class _Replay:
    """One episode of a demonstration game: reset on construction, then ``play`` commands."""

    def __init__(self, env: Any, adapter: Any, tokenizer: Any, prompt: PromptSettings, stop_ids: Sequence[int],
                 task_id: str, seed: int, reasoning: DemonstrationReasoning = "action") -> None:
        self.env, self.adapter, self.tokenizer, self.prompt = env, adapter, tokenizer, prompt
        self.stop_ids, self.task_id, self.reasoning = stop_ids, task_id, reasoning
        obs, info = env.reset(seed=seed, options={"task_id": task_id})
        self.view = EpisodeView.start(env, obs, info)

    def play(self, commands: Sequence[str | ExpertAction], demos: list[Demonstration] | None,
             source: DemonstrationSource = "plan") -> bool:
        """Step ``commands`` in order, appending one demonstration per accepted step to ``demos``
        (None: step without recording). False once a step is refused or the episode ends."""
        for command in commands:
            text = self.response(command)
            if demos is not None:
                self.record(text, demos, source)
            obs, _, terminated, truncated, info = self.env.step(text)
            transition = info.get("transition")
            if transition is None or not transition.action.ok or transition.error:
                if demos is not None:
                    demos.pop()  # a refused step teaches nothing
                log.warning("replayed step %r of %s was not accepted; replay cut there", command, self.task_id)
                return False
            self.view.record(text, obs, info)
            if terminated or truncated:
                return False
        return True

    def response(self, command: str | ExpertAction) -> str:
        """The demonstration's reply for ``command`` at this state."""
        task = self.view.instruction if self.reasoning == "task" else None
        return demonstration_response(command, self.adapter.grammar, task)

    def record(self, text: str, demos: list[Demonstration], source: DemonstrationSource = "plan") -> None:
        """One demonstration: this state's prompt, answered with ``text`` (``demonstration_response``)."""
        prompt_ids = render_prompt(self.tokenizer, self.view, self.prompt)
        response_ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + list(self.stop_ids[:1])
        demos.append(Demonstration(self.task_id, self.view.step, prompt_ids, response_ids, text, source))

    def follow(self, response: str) -> bool:
        """Step the policy's own ``response`` (refused or not, as in its episode); False once the
        episode ends."""
        obs, _, terminated, truncated, info = self.env.step(response)
        self.view.record(response, obs, info)
        return not (terminated or truncated)


def _bar(total: int, desc: str, unit: str) -> Any:
    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, leave=False)


def as_sample(demo: Demonstration) -> StepSample:
    """Every response token trained (advantage 1 is unused by the SFT loss)."""
    n = len(demo.response_ids)
    return StepSample(prompt_ids=demo.prompt_ids, response_ids=demo.response_ids, response_text=demo.response_text,
                      reasoning_tokens=None, action_tokens=None, reward=0.0, env_reward=0.0,
                      token_advantages=[1.0] * n, loss_mask=[True] * n)


def sft_loss(model: Any, samples: Sequence[StepSample], pad_id: int, num_tokens: float) -> tuple[torch.Tensor, float]:
    """Summed cross-entropy of the response tokens / ``num_tokens``; prompt and padding
    positions are never targets (``collate`` lays prompts left of the response columns)."""
    device = next(model.parameters()).device
    batch = collate(samples, pad_id, device)
    logp, _ = response_logprobs(model, batch)
    mask = batch.loss_mask.float()
    nll = -(logp * mask).sum()
    return nll / num_tokens, float(mask.sum())


def run_warmup(model: Any, demos: Sequence[Demonstration], settings: WarmupSettings, pad_id: int, seed: int,
               log_fn: Callable[[dict[str, Any]], None] | None = None,
               progress: bool = False,
               autocast: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
               ) -> list[dict[str, float]]:
    """``settings.steps`` AdamW steps on LoRA, each over ``batch_size`` demonstrations drawn
    without replacement per pass (seeded); returns one metrics dict per step. ``autocast``:
    the run's mixed precision around each forward (``ParallelStrategy.autocast``)."""
    if not demos:
        raise ValueError("the warm start has no demonstrations (no expert step was accepted)")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    rng = random.Random(seed)
    order: list[int] = []
    history: list[dict[str, float]] = []
    was_training = model.training
    model.train()
    bar = _bar(settings.steps, "warm start", "step") if progress else None
    for step in range(1, settings.steps + 1):
        picked = []
        while len(picked) < min(settings.batch_size, len(demos)):
            if not order:
                order = list(range(len(demos)))
                rng.shuffle(order)
            picked.append(order.pop())
        samples = [as_sample(demos[i]) for i in picked]
        num_tokens = float(sum(len(s.response_ids) for s in samples))
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for mb in micro_batches(list(range(len(samples))), settings.micro_batch_size):
            with autocast():
                loss, _ = sft_loss(model, [samples[i] for i in mb], pad_id, num_tokens)
            loss.backward()
            total += float(loss.detach())
        grad_norm = norm_value(torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm))
        optimizer.step()
        metrics = {"phase": "warmup", "iteration": 0, "warmup_step": step, "loss": total, "grad_norm": grad_norm,
                   "tokens": num_tokens}
        history.append(metrics)
        if log_fn is not None:
            log_fn(metrics)
        if bar is not None:
            bar.update(1)
            bar.set_postfix({"loss": f"{total:.3f}"})
    if bar is not None:
        bar.close()
    optimizer.zero_grad(set_to_none=True)
    if not was_training:
        model.eval()
    return history
