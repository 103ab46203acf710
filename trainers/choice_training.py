"""Training a ``ChoicePolicy`` in a rubricgym env with any registered estimator.

One iteration: ``tasks_per_iteration`` tasks, G rollouts each from one initial state (the same
env seed), played by sampling the policy over the admissible actions; the resolved estimator's
per-step values (``rubricgym.estimators.group_step_values``, the computation the LLM trainer
uses) become each step's advantage; then ``epochs`` clipped policy-gradient steps with the
objective the study fixes for every estimator (``ChoiceObjective``). Everything is seeded: the
task stream and env seeds by the run's seed alone (so the estimators of one seed see the same
tasks and initial states), the sampling stream by the seed too (the same start for every
estimator; it parts once their policies differ).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.contract import Trajectory
from rubricgym.estimators import CreditRollout, ResolvedEstimator, group_step_values
from rubricgym.estimators.registry import LossAggregation
from rubricgym.prompts import EpisodeView
from rubricgym.records import step_records
from rubricgym.registration import expert_of
from rubricgym.trainers.choice_policy import ChoicePolicy, ChoiceState, fill_templates
from rubricgym.trainers.update import step_aggregation_base

__all__ = ["ChoiceObjective", "ChoiceRollout", "ChoiceStep", "ChoiceTrainer", "IterationStats"]


class ChoiceObjective(BaseModel):
    """The objective every estimator of a study trains with (stated in its files)."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(0.05, gt=0, description="Adam's learning rate on the feature weights")
    epochs: int = Field(2, ge=1, description="gradient steps per iteration on its rollouts")
    clip_low: float = Field(0.2, ge=0)
    clip_high: float = Field(0.28, ge=0)
    entropy_coef: float = Field(0.001, ge=0)
    loss_aggregation: LossAggregation = Field(
        "rollout_mean_step_mean", description="token_mean | step_mean | rollout_mean_step_mean (one token per "
        "step: the first two agree); another value is refused when the study's config loads")
    skip_zero_advantage: bool = False


@dataclass
class ChoiceStep:
    """One decision, as credit reads it (a ``CreditStep``) and as the update needs it."""

    state: ChoiceState
    action: int
    old_logp: float
    env_reward: float
    context_key: str
    info: dict[str, Any]
    anchor: str
    response_length: int = 1


@dataclass
class ChoiceRollout:
    task_id: str
    seed: int
    steps: list[ChoiceStep] = field(default_factory=list)
    success: bool = False
    trajectory: Trajectory | None = None

    def credit(self) -> CreditRollout:
        return CreditRollout(self.steps, self.success, self.trajectory, f"task {self.task_id}")


@dataclass
class IterationStats:
    """One iteration's training metrics and the papers' success-scarcity diagnostics."""

    success_rate: float
    return_mean: float
    steps_mean: float
    failed_share: float  # rollouts that failed
    groups_without_success: float  # groups in which no rollout succeeded
    judged_share_in_failures: float  # actions of failed rollouts with a nonzero rubric judgment
    nonzero_advantage_share: float  # steps whose credit is nonzero


def _state(env_info: dict[str, Any], observation: str, history: list[str], instruction: str) -> ChoiceState:
    """What the policy sees: the instruction (the reset's ``info`` has it; a step's does not)."""
    actions = fill_templates(list(env_info.get("action_templates") or []) + list(env_info.get("admissible_actions") or []),
                             instruction)
    return ChoiceState(instruction, observation, tuple(dict.fromkeys(actions)), tuple(history))


def _matching(command: str, state: ChoiceState, info: dict[str, Any]) -> int | None:
    """The shown action an expert command is: itself, or the filled template it instantiates
    (the expert types its own search text; the policy's search text is the instruction)."""
    if command in state.actions:
        return state.actions.index(command)
    head = command.split("[", 1)[0] + "["
    templates = fill_templates([t for t in info.get("action_templates") or [] if t.startswith(head)], state.instruction)
    return state.actions.index(templates[0]) if templates and templates[0] in state.actions else None


def _judged(info: dict[str, Any]) -> bool:
    """Any operator of the step's TRCA record fired (the deterministic analogue of the paper's
    'a nonzero rubric judgment')."""
    record = step_records(info).trca()
    return record is not None and any(v for v in record.judgments.values())


class ChoiceTrainer:
    """Trains one ``ChoicePolicy`` on ``env_id``'s tasks with one resolved estimator."""

    def __init__(self, env_fn: Callable[[], gym.Env], tasks: Sequence[str], estimator: ResolvedEstimator,
                 objective: ChoiceObjective, group_size: int, tasks_per_iteration: int, seed: int,
                 policy: ChoicePolicy | None = None):
        if not tasks:
            raise ValueError("no tasks to train on")
        self.env = env_fn()
        self.tasks = list(tasks)
        self.estimator = estimator
        self.objective = objective
        self.group_size, self.tasks_per_iteration, self.seed = group_size, tasks_per_iteration, seed
        torch.manual_seed(seed)
        self.policy = policy or ChoicePolicy()
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=objective.lr)
        self.sampling = torch.Generator().manual_seed(seed)
        self.iteration = 0

    def close(self) -> None:
        self.env.close()

    # ---- playing ---------------------------------------------------------------------------
    def play(self, task_id: str, env_seed: int, greedy: bool = False,
             generator: torch.Generator | None = None) -> ChoiceRollout:
        obs, info = self.env.reset(seed=env_seed, options={"task_id": task_id})
        view = EpisodeView.start(self.env, obs, info)
        rollout, history, done = ChoiceRollout(task_id, env_seed), [], False
        while not done:
            state = _state(info, obs, history, view.instruction)
            index, logp = self.policy.act(state, generator or self.sampling, greedy=greedy)
            action = state.actions[index]
            anchor = obs
            obs, _reward, terminated, truncated, info = self.env.step(view.grammar.render(action))
            transition = info["transition"]
            rollout.steps.append(ChoiceStep(state, index, logp, float(transition.env_reward), transition.context_key,
                                            {"rubric": info.get("rubric", {})}, anchor))
            history.append(action)
            done = bool(terminated or truncated)
        trajectory = getattr(self.env.unwrapped, "trajectory", None)
        rollout.trajectory = trajectory
        rollout.success = bool(trajectory.outcome.success) if trajectory is not None and \
            trajectory.outcome.success is not None else sum(s.env_reward for s in rollout.steps) > 0
        return rollout

    def tasks_for(self, iteration: int) -> list[tuple[str, int]]:
        """The iteration's (task, env seed) pairs: a function of the run's seed alone."""
        rng = np.random.default_rng([self.seed, iteration])
        picks = rng.choice(len(self.tasks), size=self.tasks_per_iteration, replace=len(self.tasks) < self.tasks_per_iteration)
        return [(self.tasks[int(k)], int(rng.integers(0, 2**31 - 1))) for k in picks]

    # ---- behaviour cloning -------------------------------------------------------------------
    def demonstrations(self, tasks: Sequence[str]) -> list[tuple[ChoiceState, int]]:
        """The benchmark expert's choices on ``tasks``: (state, index of its action)."""
        found = expert_of(self.env)
        if found is None:
            raise ValueError("this env's benchmark declares no expert player to warm-start from")
        expert, adapter = found
        demos = []
        for k, task_id in enumerate(tasks):
            obs, info = self.env.reset(seed=self.seed * 1000 + k, options={"task_id": task_id})
            view, history = EpisodeView.start(self.env, obs, info), []
            for command in expert(adapter):
                state = _state(info, obs, history, view.instruction)
                index = _matching(str(command), state, info)
                if index is None:
                    break  # the expert's command is not among the shown actions: the demonstration ends
                action = state.actions[index]
                demos.append((state, index))
                obs, _, terminated, truncated, info = self.env.step(view.grammar.render(action))
                history.append(action)
                if terminated or truncated:
                    break
        return demos

    def warm_start(self, tasks: Sequence[str], steps: int, lr: float) -> float:
        """Cross-entropy on the expert's choices for ``steps`` full-batch Adam steps; the last loss."""
        demos = self.demonstrations(tasks)
        if not demos:
            raise ValueError("the expert produced no demonstration on the warm-start tasks")
        optimizer = torch.optim.Adam(self.policy.parameters(), lr=lr)
        loss = torch.zeros(())
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            loss = -torch.stack([self.policy.log_probs(state)[index] for state, index in demos]).mean()
            loss.backward()
            optimizer.step()
        return float(loss.detach())

    # ---- one iteration -----------------------------------------------------------------------
    def train_iteration(self) -> IterationStats:
        groups = [[self.play(task, env_seed) for _ in range(self.group_size)] for task, env_seed in
                  self.tasks_for(self.iteration)]
        values = [group_step_values(self.estimator, [r.credit() for r in group]).values for group in groups]
        stats = self._stats(groups, values)
        self._update(groups, values)
        self.iteration += 1
        return stats

    def _update(self, groups: list[list[ChoiceRollout]], values: list[list[np.ndarray]]) -> None:
        obj = self.objective
        rollouts = [(r, v) for group, vs in zip(groups, values, strict=True) for r, v in zip(group, vs, strict=True)]
        kept = [(s, float(a), len(r.steps)) for r, v in rollouts for s, a in zip(r.steps, v, strict=True)
                if not (obj.skip_zero_advantage and a == 0.0)]
        if not kept:
            return
        # the LLM trainer's aggregation rule, with one trained "token" (the choice) per step
        base = step_aggregation_base(obj.loss_aggregation, [1.0] * len(kept), [t for _, _, t in kept])
        total = sum(base)
        samples = [(s, a, b / total) for (s, a, _), b in zip(kept, base, strict=True)]  # step, advantage, weight
        for _ in range(obj.epochs):
            self.optimizer.zero_grad(set_to_none=True)
            loss = torch.zeros(())
            for step, advantage, weight in samples:
                logp_all = self.policy.log_probs(step.state)
                logp = logp_all[step.action]
                ratio = torch.exp(logp - step.old_logp)
                surrogate = torch.maximum(-advantage * ratio,
                                          -advantage * torch.clamp(ratio, 1 - obj.clip_low, 1 + obj.clip_high))
                entropy = -(logp_all.exp() * logp_all).sum()
                loss = loss + weight * (surrogate - obj.entropy_coef * entropy)
            loss.backward()
            self.optimizer.step()

    @staticmethod
    def _stats(groups: list[list[ChoiceRollout]], values: list[list[np.ndarray]]) -> IterationStats:
        rollouts = [r for g in groups for r in g]
        failed = [r for r in rollouts if not r.success]
        failed_steps = [s for r in failed for s in r.steps]
        all_values = np.concatenate([v for vs in values for v in vs]) if rollouts else np.zeros(0)
        return IterationStats(
            success_rate=float(np.mean([r.success for r in rollouts])),
            return_mean=float(np.mean([sum(s.env_reward for s in r.steps) for r in rollouts])),
            steps_mean=float(np.mean([len(r.steps) for r in rollouts])),
            failed_share=len(failed) / len(rollouts),
            groups_without_success=float(np.mean([not any(r.success for r in g) for g in groups])),
            judged_share_in_failures=float(np.mean([_judged(s.info) for s in failed_steps])) if failed_steps else 0.0,
            nonzero_advantage_share=float(np.mean(all_values != 0.0)) if all_values.size else 0.0,
        )

    def evaluate(self, tasks: Sequence[tuple[str, int]], env: gym.Env | None = None) -> list[bool]:
        """Greedy play of each (task, env seed); per task, whether it succeeded."""
        own = self.env
        if env is not None:
            self.env = env
        try:
            return [self.play(task, seed, greedy=True).success for task, seed in tasks]
        finally:
            self.env = own
