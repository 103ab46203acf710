"""An LLM rubric judge as a reward component.

``JudgeComponent`` scores each finished episode (``info["trajectory"]`` on its last step)
against a static or per-task rubric: 0 on every non-final step, R (in [-1, 1]) on the step
that ends the episode. A judge does not keep the engine reward by default (its verdict
replaces the outcome; ``keep_env_reward=True`` adds it). A single episode has no group, so
there is no discriminative dropout and no advantage here: use ``DracoJudge.score_group`` in a
trainer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.contract import Trajectory, Transition
from rubricgym.judges.config import JudgeSettings
from rubricgym.judges.pipeline import DracoJudge
from rubricgym.judges.rubric import Rubric, load_rubric
from rubricgym.rewards import ComponentScore, RewardContext, RubricReward

__all__ = ["JudgeComponent", "JudgeRewardSpec", "RubricJudgeReward", "RubricSource"]

RubricSource = Rubric | Callable[[Trajectory], Rubric]


class JudgeComponent:
    """Record parts (on the final step): ``rubric``, ``verdicts``, ``criteria``, ``unanswered``,
    ``dropped_citations``, ``step_passes``, ``step_fails``, ``errors``; earlier steps carry
    ``{"reward": 0.0, "pending": true}``."""

    def __init__(self, judge: DracoJudge, rubric: RubricSource | None = None, name: str = "judge",
                 keep_env_reward: bool = False):
        self.judge = judge
        self.rubric = rubric if rubric is not None else judge.static_rubric
        if self.rubric is None:
            raise ValueError("a judge reward needs a rubric, a per-task rubric function, or a judge with a static rubric")
        self.name = name
        self.keep_env_reward = keep_env_reward

    def _rubric_for(self, traj: Trajectory) -> Rubric:
        return self.rubric if isinstance(self.rubric, Rubric) else self.rubric(traj)

    def reset(self, info: Mapping[str, Any]) -> None:
        return None

    def score(self, transition: Transition, info: Mapping[str, Any]) -> ComponentScore:
        if not (transition.terminated or transition.truncated):
            return ComponentScore(0.0, {"pending": True})
        traj = info.get("trajectory")
        if not isinstance(traj, Trajectory):
            raise RuntimeError("the judge needs info['trajectory'] on the last step (a RubricEnv underneath)")
        rubric = self._rubric_for(traj)
        score = self.judge.score_episode(traj, rubric)
        return ComponentScore(float(score.reward), {
            "rubric": rubric.name,
            "verdicts": [v.model_dump(mode="json") for v in score.verdicts],
            "criteria": {c.id: c.text for c in rubric.criteria},
            "unanswered": score.unanswered,
            "dropped_citations": score.dropped_citations,
            "step_passes": score.step_passes,
            "step_fails": score.step_fails,
            "errors": score.judge_errors,
        })


class RubricJudgeReward(RubricReward):
    """A ``RubricReward`` with one judge component (``info["rubric"]["judge"]``, alias
    ``info["judge"]``)."""

    def __init__(self, env: gym.Env[str, str], judge: DracoJudge, rubric: RubricSource | None = None,
                 keep_env_reward: bool = False):
        self.judge_component = JudgeComponent(judge, rubric, keep_env_reward=keep_env_reward)
        super().__init__(env, [(self.judge_component, 1.0)])

    @property
    def rubric(self) -> RubricSource:
        return self.judge_component.rubric


class JudgeRewardSpec(BaseModel):
    """``gym.make(id, reward=JudgeRewardSpec(...))`` or in a list with other components.

    ``rubric``: a rubric file; default: the benchmark's packaged rubric (a clear error when
    it ships none). ``judge``: a ready judge (e.g. a self-judge);
    default: an OpenAI-compatible judge from ``settings`` (or the RUBRICGYM_JUDGE_* environment).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "judge"
    settings: JudgeSettings | None = None
    rubric: str | None = None
    judge: DracoJudge | None = Field(None, exclude=True)
    keep_env_reward: bool = False

    def component(self, env: gym.Env[str, str], context: RewardContext) -> JudgeComponent:
        if self.rubric:
            rubric = load_rubric(self.rubric)
        elif context.judge_rubric is not None:
            rubric = load_rubric(context.judge_rubric)
        else:
            raise LookupError(f"benchmark {context.benchmark} ships no judge rubric; pass a rubric file "
                              "(see docs/draco.md)")
        judge = self.judge or DracoJudge.from_settings(self.settings, static_rubric=rubric)
        return JudgeComponent(judge, rubric=rubric, name=self.name, keep_env_reward=self.keep_env_reward)
