"""The reference the TRL route is checked against: rubricgym's own trainer's
``assign_advantages`` on ``Rollout``/``StepSample`` objects built from the episodes (per step,
each step its own response), its per-step token advantages then laid at the step's place in
the one completion.

    python tests/integrations/own_trainer_credit.py EPISODES.json OUT.json   # rebuilds the fixture
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from rubricgym.integrations.episodes import Episode
from rubricgym.estimators import resolve_estimator
from rubricgym.trainers.advantages import assign_advantages
from rubricgym.trainers.rollout import Rollout, StepSample


def _relative(span: Sequence[int] | None, at: int) -> tuple[int, int] | None:
    return None if span is None else (int(span[0]) - at, int(span[1]) - at)


def own_trainer_advantages(episodes: Sequence[Episode], estimator: str, group_size: int,
                           length: int) -> np.ndarray:
    groups: list[list[Rollout]] = []
    for g in range(0, len(episodes), group_size):
        group = []
        for m, episode in enumerate(episodes[g: g + group_size]):
            rollout = Rollout(task_id=episode.task_id, seed=episode.seed, group=g // group_size, member=m)
            for s in episode.steps:
                at, end = s.response
                rollout.steps.append(StepSample(
                    prompt_ids=[], response_ids=[0] * (end - at), response_text="",
                    reasoning_tokens=_relative(s.reasoning, at), action_tokens=_relative(s.action, at),
                    reward=s.reward, env_reward=s.env_reward, context_key=s.context_key, info=s.info))
            group.append(rollout)
        groups.append(group)
    assign_advantages(groups, resolve_estimator(estimator))
    out = np.zeros((len(episodes), length))
    for row, rollout in enumerate(r for group in groups for r in group):
        for step, s in zip(rollout.steps, episodes[row].steps, strict=True):
            out[row, s.response[0]: s.response[1]] = step.token_advantages
    return out


def main(argv: list[str]) -> None:
    data: dict[str, Any] = json.loads(open(argv[0]).read())
    episodes = [Episode.from_dict(e) for e in data["episodes"]]
    values = own_trainer_advantages(episodes, data["estimator"], data["group_size"], data["length"])
    data["own_trainer_token_advantages"] = [[[i, float(v)] for i, v in enumerate(row) if v != 0.0] for row in values]
    with open(argv[1], "w") as f:
        json.dump(data, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
