"""rubricgym envs inside PrimeIntellect's verifiers (0.4.0, its ``verifiers.v1`` API): a
taskset of a rubricgym env id's tasks and the env that plays each one, turn by turn.

verifiers finds a taskset by name: ``vf-eval <id>`` imports the module ``<id>`` (dashes as
underscores) and takes the ``Taskset`` and ``Env`` subclasses its ``__all__`` exports. That
module is ``rubricgym_verifiers`` (the tiny package in ``plugins/verifiers``, installed beside
rubricgym: ``make verifiers-venv``), so the name is ``rubricgym-verifiers``; this module holds
the code. verifiers 0.4.0 needs ``openai<3``, which the main venv does not have: it lives in
its own venv (``.venvs/verifiers``). docs/verifiers.md.

One episode is the one ``gym.make(env_id)`` plays: the env is reset with the task's id and seed,
the model's first turn gets rubricgym's public chat prompt (``rubricgym.prompts``: the system
task and format instruction, then the observation with the admissible actions), each reply is
sent to ``env.step`` as is (rubricgym's own parser reads the action from it) and the next
observation comes back as the user turn, until the env ends the episode. Nothing is re-scored.
The trace's rewards are rubricgym's components, each summed over the episode: ``env_return``
(the engine's rewards) and one ``<component>_return`` per rubric component (``trca_return``,
r_TRCA, for the registered envs), so their weighted sum is the episode's return; metrics add
the return, steps and success. Every step's record (reply, reward, facts, every rubric record)
stays in the rollout's state (``trace.state.steps``) and, JSON, in ``trace.info["rubricgym"]``
(what ``vf-eval`` saves).

    vf-eval rubricgym-verifiers --env.taskset.env-id ALFWorld-Rubric-v0 --env.taskset.n 2 ...
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

try:
    import verifiers.v1 as vf
except ImportError as exc:  # verifiers is missing: name the fix, not just the module
    raise ImportError(f"rubricgym.integrations.verifiers_env needs verifiers 0.4.0 ({exc}): make verifiers-venv "
                      "(its own venv, .venvs/verifiers: verifiers needs openai<3)") from exc

import gymnasium as gym
from pydantic import Field, field_validator

from rubricgym.contract import Transition
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages
from rubricgym.registration import check_env_id, task_ids
from rubricgym.remote.info_json import info_to_json

__all__ = ["TASKSET_ID", "RubricgymData", "RubricgymEnv", "RubricgymEnvConfig", "RubricgymState", "RubricgymTask",
           "RubricgymTaskset", "RubricgymTasksetConfig", "episode_rewards", "step_record"]

TASKSET_ID = "rubricgym-verifiers"  # the plugin module rubricgym_verifiers, as verifiers names it
# Engines change process-wide state (docs/eval.md, "Concurrency"); verifiers runs several
# rollouts at once on one event loop, so every engine call in this process takes turns.
_ENGINE_LOCK = threading.RLock()


class RubricgymTasksetConfig(vf.TasksetConfig):
    """Which episodes load (``--env.taskset.*``): the env id's tasks (``tasks``, else all of
    ``split``'s), the first ``n`` of them, task i reset with seed ``seed + i`` (the seeds
    ``rubricgym eval --seed`` gives its first sample)."""

    env_id: str = Field("", description="the rubricgym env id to play (required; empty only so that the "
                                        "CLI can build this config before it reads the flags)")
    split: str = Field("train", description="'train': the env id's tasks, 'eval': its held-out pair's")
    tasks: list[str] | None = None
    n: int | None = Field(None, ge=1, description="at most this many tasks (None: all)")
    seed: int = 0
    max_steps: int | None = Field(None, ge=1, description="the env's step limit (None: the spec's)")
    make_kwargs: dict[str, Any] = Field(default_factory=dict, description="more gym.make keyword arguments")
    prompt_settings: PromptSettings = Field(default_factory=lambda: PromptSettings(style="chat"))

    @field_validator("prompt_settings")
    @classmethod
    def _chat_only(cls, value: PromptSettings) -> PromptSettings:
        if value.style != "chat":
            raise ValueError("verifiers keeps one growing conversation: prompt_settings.style must be 'chat'")
        return value


class RubricgymData(vf.TaskData):
    """One episode: the env id, its task and seed; no prompt (the env opens the exchange)."""

    env_id: str
    task_id: str
    seed: int
    max_steps: int | None = None
    make_kwargs: dict[str, Any] = Field(default_factory=dict)
    prompt_settings: PromptSettings = Field(default_factory=lambda: PromptSettings(style="chat"))


class RubricgymState(vf.State):
    """The rollout's state: every step's record (``step_record``), in order."""

    steps: list[dict[str, Any]] = Field(default_factory=list)


class RubricgymTask(vf.Task[RubricgymData, RubricgymState, vf.TaskConfig]):
    pass


class RubricgymEnvConfig(vf.EnvConfig):
    """One agent, the player: verifiers' plain chat loop (harness ``null``: no tools, no shell)
    in a local process (runtime ``subprocess``: the loop runs no code it was sent, so it needs
    no sandbox), and no network notice in the prompt (the prompt is rubricgym's, word for
    word). ``--env.player.*`` changes any of them."""

    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig(),
                                            network_notice=False)


class RubricgymEnv(vf.Env[RubricgymEnvConfig]):
    """Plays one task: ``gym.make``, reset, then one model turn per env step."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data: RubricgymData = task.data
        settings = data.prompt_settings
        with _ENGINE_LOCK:
            env = gym.make(data.env_id, **data.make_kwargs,
                           **({"max_steps": data.max_steps} if data.max_steps is not None else {}))
            obs, info = env.reset(seed=data.seed, options={"task_id": data.task_id})
        steps: list[dict[str, Any]] = []
        outcome: dict[str, Any] | None = None
        try:
            view = EpisodeView.start(env, obs, info)
            async with agents.player.interaction(task) as interaction:
                trace = interaction.trace
                segment = await interaction.turn(build_messages(view, settings))  # system + first observation
                while not segment.terminated:
                    reply = _reply_text(segment)
                    with _ENGINE_LOCK:
                        obs, reward, terminated, truncated, info = env.step(reply)
                    view.record(reply, obs, info)
                    done = bool(terminated or truncated)
                    if done:
                        trajectory = getattr(env.unwrapped, "trajectory", None)
                        outcome = trajectory.outcome.model_dump(mode="json") if trajectory is not None else None
                    steps.append(step_record(len(steps) + 1, reply, obs, float(reward), bool(terminated),
                                             bool(truncated), info))
                    if isinstance(trace.state, RubricgymState):
                        trace.state.steps = steps
                    if done:
                        break
                    segment = await interaction.turn(build_messages(view, settings)[-1]["content"])
                rewards, metrics = episode_rewards(steps, _keeps_env_reward(env))
                for name, (value, weight) in rewards.items():
                    trace.record_reward(name, value, weight)
                if outcome is not None and outcome.get("success") is not None:
                    metrics["success"] = float(outcome["success"])
                trace.record_metrics(metrics)
                trace.info["rubricgym"] = {"env_id": data.env_id, "task_id": data.task_id, "seed": data.seed,
                                           "steps": steps, "outcome": outcome}
        finally:
            with _ENGINE_LOCK:
                env.close()


class RubricgymTaskset(vf.Taskset[RubricgymTask, RubricgymTasksetConfig]):
    """One task per task id of ``env_id`` (see ``RubricgymTasksetConfig``)."""

    def load(self) -> Iterator[RubricgymTask]:
        c = self.config
        if not c.env_id:
            raise ValueError("name the rubricgym env id to play: --env.taskset.env-id <id>")
        env_id = check_env_id(c.env_id)
        tasks = list(c.tasks) if c.tasks is not None else task_ids(env_id, split=c.split, **c.make_kwargs)
        for i, task_id in enumerate(tasks[: c.n] if c.n is not None else tasks):
            yield RubricgymTask(RubricgymData(name=f"{env_id}/{task_id}", id=task_id, prompt=None, env_id=env_id,
                                              task_id=task_id, seed=c.seed + i, max_steps=c.max_steps,
                                              make_kwargs=c.make_kwargs, prompt_settings=c.prompt_settings),
                                c.task)


def step_record(step: int, reply: str, observation: str, reward: float, terminated: bool, truncated: bool,
                info: Mapping[str, Any]) -> dict[str, Any]:
    """One step, all JSON: its number, the reply sent to the env, the reward and the engine's
    part of it, the flags, the observation, the transition's facts and parsed action, and every
    rubric record (``info["rubric"]``)."""
    transition = info.get("transition")
    typed = transition if isinstance(transition, Transition) else None
    rubric = info_to_json({"rubric": info.get("rubric", {})})[0]["rubric"]
    return {"step": step, "reply": reply, "reward": reward,
            "env_reward": float(typed.env_reward) if typed is not None else float(info.get("env_reward", reward)),
            "terminated": terminated, "truncated": truncated, "observation": observation,
            "action": typed.action.model_dump(mode="json") if typed is not None else None,
            "facts": typed.facts.model_dump(mode="json") if typed is not None else None,
            "rubric": rubric}


def episode_rewards(steps: list[dict[str, Any]], keeps_env_reward: bool
                    ) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """The trace's rewards, {name: (value, weight)}: ``env_return`` (weight 1 when the step
    reward includes the engine's reward, else 0) and ``<component>_return`` for each rubric
    component, with its weight; and the metrics: ``return`` (the step rewards summed, what
    ``gym.make`` returns) and ``steps``."""
    rewards: dict[str, tuple[float, float]] = {
        "env_return": (sum(s["env_reward"] for s in steps), 1.0 if keeps_env_reward else 0.0)}
    for s in steps:
        for name, record in s["rubric"].items():
            if isinstance(record, Mapping) and "reward" in record:
                value, weight = rewards.get(f"{name}_return", (0.0, float(record.get("weight", 1.0))))
                rewards[f"{name}_return"] = (value + float(record["reward"]), weight)
    return rewards, {"return": sum(s["reward"] for s in steps), "steps": float(len(steps))}


def _keeps_env_reward(env: gym.Env[Any, Any]) -> bool:
    """Whether the env's step reward includes the engine's (its RubricReward's setting; an env
    without one returns the engine's reward)."""
    try:
        return bool(env.get_wrapper_attr("keep_env_reward"))
    except AttributeError:
        return True


def _reply_text(segment: Any) -> str:
    """The model's last reply as it was sampled (verifiers' ``last_reply`` strips it)."""
    for message in reversed(segment.messages):
        if getattr(message, "role", None) == "assistant":
            return str(message.content or "")
    return segment.last_reply
