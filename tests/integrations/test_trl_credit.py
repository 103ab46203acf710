"""The TRL route's token advantages equal rubricgym's own trainer's on committed episodes
(step records of a real TRL rollout on ALFWorld; the expected values were written by the own
trainer's ``assign_advantages``, tests/integrations/own_trainer_credit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rubricgym.integrations.episodes import Episode, completion_advantages, group_episodes

FIXTURE = Path(__file__).parent / "fixtures" / "alfworld_trca_group.json"


def load() -> tuple[dict, list[Episode]]:
    data = json.loads(FIXTURE.read_text())
    return data, [Episode.from_dict(e) for e in data["episodes"]]


def test_completion_advantages_equal_the_own_trainer_s_on_the_fixture():
    data, episodes = load()
    values, mask = completion_advantages(data["estimator"], episodes, data["group_size"], data["length"])
    expected = np.zeros_like(values)
    for row, pairs in enumerate(data["own_trainer_token_advantages"]):
        for i, v in pairs:
            expected[row, i] = v
    assert values.shape == (4, data["length"])
    np.testing.assert_allclose(values, expected, atol=1e-9)
    for row, episode in enumerate(episodes):  # trca: action tokens only
        actions = np.zeros(data["length"], dtype=bool)
        for s in episode.steps:
            actions[s.action[0]: s.action[1]] = True
            assert not values[row, s.reasoning[0]: s.reasoning[1]].any()
        assert not values[row, ~actions].any() and mask[row].tolist() == actions.tolist()
        firsts = {float(values[row, s.action[0]]) for s in episode.steps}
        assert len(firsts) == len(episode.steps)  # each step its own value


def test_grpo_puts_one_value_on_every_response_token():
    data, episodes = load()
    values, mask = completion_advantages("grpo", episodes, data["group_size"], data["length"])
    for row, episode in enumerate(episodes):
        responses = np.zeros(data["length"], dtype=bool)
        for s in episode.steps:
            responses[s.response[0]: s.response[1]] = True
        assert mask[row].tolist() == responses.tolist()


def test_a_chunk_of_two_tasks_is_no_group():
    _, episodes = load()
    with pytest.raises(ValueError, match="num_generations"):
        group_episodes(episodes, 3)
    with pytest.raises(ValueError, match="different tasks/seeds"):
        group_episodes([episodes[1], episodes[2]], 2)


def test_draco_needs_a_judge():
    data, episodes = load()
    with pytest.raises(ValueError, match=r"judge=DracoJudge"):
        completion_advantages("draco", episodes, 2, data["length"])
