"""Library test and diff on hand-built trajectories (no engine): counts, places, flags and
the category statistics follow from the judgments."""

from __future__ import annotations

import copy

import pytest
import yaml
from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts
from rubricgym.registration import operator_library

from rubricgym.contract import ParsedAction, Trajectory, Transition
from rubricgym.trca import load_library
from rubricgym.trca.coverage import (
    diff_libraries,
    format_diff,
    format_test_report,
    library_coverage,
)


def step(i: int, **facts) -> Transition:
    parsed = facts.get("parsed", True)
    action = ParsedAction(ok=True, kind="action", action=f"a{i}") if parsed else ParsedAction(ok=False, error="missing_tag")
    return Transition(benchmark="ALFWorld", step=i, response="r", action=action, observation="o",
                      facts=ALFWorldFacts(**facts))


@pytest.fixture
def trajectories() -> list[Trajectory]:
    binding = ALFWorldBinding(target_type="apple", destination_type="fridge").model_dump(mode="json")
    good = [step(0, accepted=True, state_changed=True, new_object_types=["apple"]),
            step(1, accepted=True, state_changed=True, picked_up_type="apple")]
    bad = [step(0, parsed=False), step(1, accepted=True, state_changed=True)]
    return [Trajectory(benchmark="ALFWorld", task_id=f"t{k}", binding=binding, transitions=t)
            for k, t in enumerate([good, bad])]


@pytest.fixture
def shipped() -> dict:
    return yaml.safe_load(operator_library("ALFWorld").read_text())


def test_counts_places_and_flags(trajectories):
    lib = load_library(operator_library("ALFWorld"), ALFWorldFacts, ALFWorldBinding)
    report = library_coverage(lib, trajectories, ALFWorldBinding)
    by_id = {o.id: o for o in report.operators}
    assert (report.episodes, report.steps) == (2, 4)
    assert by_id["target_first_seen"].fired_steps == 1 and [str(s) for s in by_id["target_first_seen"].first_fired] == ["0:0"]
    assert by_id["picked_target"].fired_steps == 1 and by_id["picked_target"].fired_episodes == 1
    assert [str(s) for s in by_id["parse_failure"].first_fired] == ["1:0"]
    assert "lit_target" in report.never_fire and report.always_fire == []
    cats = {c.category: c for c in report.categories}
    b = lib.library.budgets
    # Execution paid once: r_exec / 5 on one of four steps; Invalidity: -r_inval / 5 on one
    assert cats["execution"].step_max == pytest.approx(b.r_exec / 5) and cats["execution"].steps_with_any == 1
    assert cats["invalidity"].step_min == pytest.approx(-abs(b.r_inval) / 5)
    assert "never fire (no signal" in format_test_report(report)


def test_an_operator_firing_on_every_step_is_flagged(trajectories, shipped):
    data = copy.deepcopy(shipped)
    data["operators"].insert(0, {"id": "took_a_step", "category": "evidence", "description": "x",
                                 "reads": ["episode_done"], "condition": "facts.episode_done == false",
                                 "examples": [{"expected": True}, {"expected": False, "facts": {"episode_done": True}}]})
    lib = load_library(data, ALFWorldFacts, ALFWorldBinding)
    report = library_coverage(lib, trajectories, ALFWorldBinding)
    assert report.always_fire == ["took_a_step"]


def test_diff_of_equal_libraries_is_empty_and_an_added_operator_shows(trajectories, shipped):
    a = load_library(operator_library("ALFWorld"), ALFWorldFacts, ALFWorldBinding)
    assert diff_libraries(a, a, trajectories).steps_detail == []
    data = copy.deepcopy(shipped)
    data["operators"] = [o for o in data["operators"] if o["id"] != "parse_failure"]
    b = load_library(data, ALFWorldFacts, ALFWorldBinding)
    diff = diff_libraries(a, b, trajectories, ALFWorldBinding)
    assert diff.only_in_a == ["parse_failure"] and diff.per_operator == {"parse_failure": 1}
    (d,) = diff.steps_detail
    assert (d.episode, d.step, d.r_trca_a < d.r_trca_b) == (1, 0, True)  # B no longer penalises the parse failure
    assert "parse_failure 1->-" in format_diff(diff)
