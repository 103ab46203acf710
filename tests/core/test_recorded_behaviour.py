"""Behaviour is unchanged by refactors: the responses recorded in
``tests/fixtures/recorded_behaviour.json`` (ALFWorld, WebShop, tau-bench retail; an expert,
a flawed and a junk rollout per group) give the same observations, step rewards, facts,
reward records, outcomes and per-step advantages as when the fixture was written."""

from __future__ import annotations

import json

import pytest

from recorded_behaviour import FIXTURE, differences, replay


@pytest.mark.slow
def test_recorded_trajectories_replay_identically() -> None:
    stored = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert set(stored) == {"ALFWorld", "WebShop", "TauBench"}
    now = json.loads(json.dumps(replay(stored), sort_keys=True))
    diffs = differences(stored, now)
    assert not diffs, "behaviour changed:\n" + "\n".join(diffs[:40])


def test_the_comparison_sees_a_changed_reward() -> None:
    stored = {"a": [{"reward": 0.25, "facts": {"parsed": True}}]}
    changed = {"a": [{"reward": 0.2500001, "facts": {"parsed": True}}]}
    assert differences(stored, json.loads(json.dumps(stored))) == []
    assert differences(stored, changed) == ["$.a[0].reward: '0.25' != '0.2500001'"]
    assert differences(stored, {"a": [{"reward": 0.25, "facts": {"parsed": False}}]})
