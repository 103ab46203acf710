"""benchmarks/alfworld_held_out_behaviour.py: the loop and wrong-object counts quoted in the docs,
recomputed from what a held-out evaluation recorded.

The fixture is three episodes of a real evaluation (the 128-step warm start's greedy play of the
bundled eval games), cut to the fields the counts read."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "fixtures" / "alfworld_eval_run"


def _module():
    spec = importlib.util.spec_from_file_location("alfworld_held_out_behaviour",
                                                  ROOT / "benchmarks" / "alfworld_held_out_behaviour.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_counts_follow_the_recorded_facts(tmp_path, capsys):
    module = _module()
    out = tmp_path / "behaviour.json"
    assert module.main([str(RUN), "--json", str(out)]) == 0
    [row] = json.loads(out.read_text())
    assert (row["label"], row["episodes"], row["successes"], row["steps"]) == ("after_warmup", 3, 1, 29)
    by_task = {e["task_id"].split("-")[1]: e for e in row["per_episode"]}
    # the box task: takes the box (the target), later a keychain with the box seen before
    assert by_task["Box"]["wrong_object"] and by_task["Box"]["wrong_with_target_in_view"]
    # the credit card task is won though a plate was picked up first, before any card was in view
    assert by_task["CreditCard"]["success"] and by_task["CreditCard"]["wrong_object"]
    assert not by_task["CreditCard"]["wrong_with_target_in_view"]
    assert row["loop_steps"] == sum(e["loop_steps"] for e in row["per_episode"]) == 3
    assert row["wrong_object_games"] == 3 and row["wrong_with_target_in_view"] == 2
    assert "after_warmup: 1/3 won; loop steps 3 of 29; wrong object in 3 games (2 with" in capsys.readouterr().out


def test_a_loop_step_is_a_repeated_or_revisited_one():
    module = _module()
    steps = [{"facts": {"repeated": True}}, {"facts": {"revisited": True}}, {"facts": {}},
             {"facts": {"picked_up_type": "apple", "seen_object_types": ["mug"]}}]
    counts = module.episode_behaviour({"task_id": "t", "binding": {"target_type": "apple"}, "transitions": steps})
    assert (counts.loop_steps, counts.wrong_object, counts.success) == (2, False, False)
    no_target = module.episode_behaviour({"binding": {}, "transitions": [{"facts": {"picked_up_type": "mug"}}]})
    assert not no_target.wrong_object  # without a target class nothing is wrong


def test_a_folder_without_evaluations_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no evaluations"):
        _module().main([str(tmp_path)])
