"""Judge rewards inside a gymnasium loop.

``RubricJudgeReward`` scores each finished episode (``env.unwrapped.trajectory``) against a
static or per-task rubric. Reward: 0 on every non-final step, R (in [-1, 1]) on the step
that ends the episode; the engine's own reward moves to ``info["env_reward"]`` (pass
``add_env_reward=True`` to add it instead). A single episode has no group, so there is no
discriminative dropout and no advantage here: use ``DracoJudge.score_group`` in a trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.contract import Trajectory
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.pipeline import DracoJudge
from rubricgym.judges.rubric import Rubric, default_rubric_for, load_rubric

RubricSource = Rubric | Callable[[Trajectory], Rubric]


class RubricJudgeReward(gym.Wrapper):
    def __init__(self, env: gym.Env, judge: DracoJudge, rubric: RubricSource | None = None, add_env_reward: bool = False):
        super().__init__(env)
        self.judge = judge
        self.rubric = rubric if rubric is not None else judge.static_rubric
        if self.rubric is None:
            raise ValueError("RubricJudgeReward needs a rubric, a per-task rubric function, or a judge with a static rubric")
        self.add_env_reward = add_env_reward

    def _rubric_for(self, traj: Trajectory) -> Rubric:
        return self.rubric(traj) if callable(self.rubric) and not isinstance(self.rubric, Rubric) else self.rubric

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, env_reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        info["env_reward"] = float(env_reward)
        reward = 0.0
        if terminated or truncated:
            traj = self.env.unwrapped.trajectory
            rubric = self._rubric_for(traj)
            score = self.judge.score_episode(traj, rubric)
            reward = score.reward
            info["judge"] = {
                "rubric": rubric.name,
                "reward": score.reward,
                "verdicts": [v.model_dump(mode="json") for v in score.verdicts],
                "criteria": {c.id: c.text for c in rubric.criteria},
                "unanswered": score.unanswered,
                "dropped_citations": score.dropped_citations,
                "step_passes": score.step_passes,
                "step_fails": score.step_fails,
                "errors": score.judge_errors,
            }
        if self.add_env_reward:
            reward += float(env_reward)
        return obs, reward, terminated, truncated, info


class JudgeRewardSpec(BaseModel):
    """``gym.make("AppWorld-Rubric-v0", reward=JudgeRewardSpec(...))``: anything with
    ``wrap(env, benchmark)`` is accepted by ``rubricgym.rewards.attach_reward``.

    ``rubric``: a rubric file or packaged name; default: the benchmark's packaged rubric.
    ``judge``: a ready judge (e.g. a self-judge); default: an OpenAI-compatible judge from
    ``settings`` (or the RUBRICGYM_JUDGE_* environment).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    settings: JudgeSettings | None = None
    rubric: str | None = None
    judge: DracoJudge | None = Field(None, exclude=True)
    add_env_reward: bool = False

    def wrap(self, env: gym.Env, benchmark: str) -> gym.Env:
        rubric = load_rubric(self.rubric) if self.rubric else default_rubric_for(benchmark)
        judge = self.judge or DracoJudge.from_settings(self.settings, static_rubric=rubric)
        return RubricJudgeReward(env, judge, rubric=rubric, add_env_reward=self.add_env_reward)
