"""A rubricgym env as a class for TRL's ``environment_factory`` (tool-calling route).

TRL makes one instance per concurrent rollout, calls ``reset(**row)`` (its text is appended to
the prompt), exposes every public method as a tool (the docstring's ``Args:`` is the schema)
and reads ``get_reward()`` (the episode's rubric reward) as a reward column. Text envs get one tool, ``act(command)``: the
command goes to the env in its own action format (``grammar.render``), so the rubric scores it
exactly as an ``<action>`` of rubricgym's own prompts. No TRL import here.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rubricgym.integrations.trl_rollout import MissingSeed
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages
from rubricgym.registration import check_env_id

__all__ = ["ENDED", "rubricgym_environment"]

ENDED = "The episode has ended: no further actions are taken."


def rubricgym_environment(env_id: str, *, prompt: PromptSettings | None = None, reasoning: str = "tool call",
                          **make_kwargs: Any) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` playing ``env_id`` (``gym.make``
    gets ``make_kwargs``). Each instance keeps its episode's step records (``step_records``:
    command, rewards, context key and the rubric's records per step) after the episode.
    ``reasoning`` fills the env format's reasoning part of each action (the tool call has none)."""
    env_id = check_env_id(env_id)
    settings = prompt or PromptSettings(style="chat")

    class RubricgymEnvironment:
        """One rubricgym env behind TRL's tool loop (one ``act`` tool)."""

        def __init__(self) -> None:
            self.env = gym.make(env_id, **make_kwargs)
            self.view: EpisodeView | None = None
            self.step_records: list[dict[str, Any]] = []
            self.done = False

        def reset(self, **row: Any) -> str:
            if row.get("seed") is None:
                raise MissingSeed("a prompt row has no 'seed': every row needs one so that its G copies start from "
                                  "one initial state; build rows with rubricgym_dataset(env_id, seeds=...)")
            task_id = row.get("task_id")
            obs, info = self.env.reset(seed=int(row["seed"]), options={"task_id": task_id} if task_id else None)
            self.view = EpisodeView.start(self.env, obs, info)
            self.step_records, self.done = [], False
            return self._current()

        def act(self, command: str) -> str:
            """Take one action in the environment and see what happens.

            Args:
                command: one admissible action, exactly as listed (e.g. "go to drawer 1").

            Returns:
                The new observation and the actions admissible now.
            """
            if self.view is None or self.done:
                return ENDED
            response = self.view.grammar.render(command, reasoning=reasoning)
            obs, reward, terminated, truncated, info = self.env.step(response)
            transition = info.get("transition")
            self.step_records.append({
                "command": command, "reward": float(reward),
                "env_reward": float(transition.env_reward) if transition is not None else float(reward),
                "context_key": transition.context_key if transition is not None else "",
                "rubric": info.get("rubric", {}), "terminated": bool(terminated), "truncated": bool(truncated),
            })
            self.view.record(response, obs, info)
            if terminated or truncated:
                self.done = True
                return f"{obs}\n\n{ENDED}"
            return self._current()

        def get_reward(self) -> float:
            """The episode's rubric reward: the env's step rewards summed (with the TRCA reward
            wrapper, r_TRCA per step plus the engine's outcome)."""
            return sum(r["reward"] for r in self.step_records)

        def _current(self) -> str:
            assert self.view is not None
            return build_messages(self.view, settings)[-1]["content"]

        def _close(self) -> None:
            self.env.close()

    RubricgymEnvironment.__name__ = RubricgymEnvironment.__qualname__ = "RubricgymEnvironment"
    return RubricgymEnvironment
