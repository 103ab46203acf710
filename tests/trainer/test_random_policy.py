"""benchmarks/random_policy.py: chance level on a registered benchmark's tasks, through the env.

The word task (tests/trainer/split_word_env.py) offers six words and is won by one, so a uniform
policy wins within k steps with probability 1 - (5/6)**k: the measured rates must be near it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from trainer.split_word_env import EVAL_ID
from trainer.word_env import WordAdapter

from rubricgym.adapter import EngineFailure
from rubricgym.env import RubricEnv

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("random_policy", ROOT / "benchmarks" / "random_policy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_success_per_budget_matches_the_chance_of_a_uniform_pick(tmp_path, capsys):
    out = tmp_path / "random.json"
    assert _module().main(["--env", EVAL_ID, "--budgets", "1,3", "--samples", "100", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    one, three = report["budgets"]["1"], report["budgets"]["3"]
    summary = capsys.readouterr().out  # one line per budget for the reader, the JSON in the file
    assert f"   3 steps: {three['successes']}/300 won" in summary and str(out) in summary
    assert one["episodes"] == three["episodes"] == 300  # 3 held-out tasks x 100 samples
    for measured, chance in ((one, 1 / 6), (three, 1 - (5 / 6) ** 3)):
        low, high = measured["wilson95"]
        assert low <= chance <= high and low <= measured["success_rate"] <= high
    assert one["successes"] <= three["successes"]  # a win within 1 step is a win within 3
    steps = [s for per_task in report["won_at_step"].values() for s in per_task if s is not None]
    assert len(steps) == three["successes"] and set(steps) <= {1, 2, 3}
    again = tmp_path / "again.json"  # seeded: the same episodes again
    _module().main(["--env", EVAL_ID, "--budgets", "1,3", "--samples", "100", "--json", str(again)])
    assert json.loads(again.read_text())["won_at_step"] == report["won_at_step"]


def test_excluded_verbs_are_never_chosen_unless_nothing_else_is_admissible():
    module = _module()
    rng = __import__("random").Random(0)
    assert {module.choose(["look", "go to desk 1", "inventory"], frozenset({"look", "inventory"}), rng)
            for _ in range(50)} == {"go to desk 1"}
    assert module.choose(["look"], frozenset({"look"}), rng) == "look"
    # all words but the winning one excluded: every episode is won at its first step
    report = module.measure(EVAL_ID, [1], 2, frozenset({"bread", "chair", "drum", "eagle", "flute"}))
    assert report["budgets"]["1"]["success_rate"] == 1.0


def test_bad_budgets_are_refused_with_a_clear_message(capsys):
    with pytest.raises(SystemExit):
        _module().main(["--env", EVAL_ID, "--budgets", "0,3"])
    assert "positive step counts" in capsys.readouterr().err


class _BrokenEngine(WordAdapter):
    def step(self, action):
        raise EngineFailure("the engine's process died")


def test_an_engine_failure_stops_the_measurement_instead_of_counting_as_a_loss():
    env = RubricEnv(_BrokenEngine(num_tasks=1), max_steps=3)
    with pytest.raises(RuntimeError, match="pick-0 .sample 0.: environment failure: the engine's process died"):
        _module().play(env, "pick-0", 0, 3, frozenset())
