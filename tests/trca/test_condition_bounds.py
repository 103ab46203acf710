"""Operator conditions are bounded: a deterministic cost bound at validation, a CPU budget at
run time, and one report per failing operator, against that operator."""

from __future__ import annotations

import copy
import logging

import numpy as np
import pytest
import yaml

from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts
from rubricgym.operator_libraries import shipped_libraries
from rubricgym.registration import operator_library
from rubricgym.trca import check_library, load_library
from rubricgym.trca.cost import MAX_BOUND, MAX_DEPTH, condition_cost
from rubricgym.trca.operators import reference_judgments

ALFWORLD = operator_library("ALFWorld")


@pytest.fixture
def data() -> dict:
    return yaml.safe_load(ALFWORLD.read_text())


def op(data: dict, op_id: str) -> dict:
    return next(o for o in data["operators"] if o["id"] == op_id)


def nested(depth: int) -> str:
    """``depth`` nested comprehensions over the inventory (the reported attack used 7)."""
    text = 'o0 == "never"'
    for k in range(depth):
        text = f"facts.inventory.exists(o{k}, {text})"
    return text


def test_depth_seven_condition_is_refused_without_running_it(data):
    o = op(data, "lit_target")
    o["condition"] = nested(7)
    o["reads"] = ["inventory"]
    o["needs"] = []
    o["examples"][0]["facts"]["inventory"] = [f"x {i}" for i in range(10)]  # ~seconds if it ran
    compiled, found = check_library(data, ALFWorldFacts, ALFWorldBinding, "ALFWorld")
    assert compiled is None
    cost = [p for p in found if p.kind == "cost"]
    assert [p.operator for p in cost] == ["lit_target"]
    assert "nested 7 deep" in cost[0].message
    assert not any(p.kind in ("example_failed", "example_error") for p in found)  # refused before examples ran


@pytest.mark.parametrize("depth", range(1, 9))
def test_the_bound_is_deterministic_and_grows_tenfold_per_level(depth):
    first, again = condition_cost(nested(depth)), condition_cost(nested(depth))
    assert first == again and first.comprehension_depth == depth
    assert first.bound == first.nodes * 10 ** depth
    refused = any(kind == "cost" for kind, _ in first.problems)
    assert refused == (depth > MAX_DEPTH or first.bound > MAX_BOUND)


def test_big_flat_condition_is_refused(data):
    o = op(data, "repeated_action")
    o["condition"] = " || ".join(["facts.repeated"] * 300)
    found = check_library(data, ALFWorldFacts, ALFWorldBinding)[1]
    assert ("repeated_action", "cost") in {(p.operator, p.kind) for p in found}


def test_string_contents_do_not_count():
    assert condition_cost('facts.location == "a.exists(x, b.exists(y, c.all(z, true)))"').comprehension_depth == 0


def test_comprehension_variable_may_not_hide_a_root(data):
    o = op(data, "lit_target")
    o["condition"] = 'facts.inventory.exists(facts, facts == "x")'
    found = check_library(data, ALFWorldFacts, ALFWorldBinding)[1]
    assert ("lit_target", "shadowed_root") in {(p.operator, p.kind) for p in found}


@pytest.mark.parametrize("path", shipped_libraries(), ids=lambda p: p.name)
def test_shipped_conditions_are_within_the_bound(path):
    for o in yaml.safe_load(path.read_text())["operators"]:
        assert condition_cost(o["condition"]).problems == [], o["id"]


def test_one_erring_condition_is_reported_once_against_itself(data):
    """Before: one condition erring on the examples' default facts produced an empty
    ``example_error`` for every example of every operator."""
    o = op(data, "repeated_action")
    o["condition"] = "facts.repeated || facts.inventory[0] == 'x'"  # errs when not repeated and empty-handed
    o["reads"] = ["repeated", "inventory"]
    found = check_library(data, ALFWorldFacts, ALFWorldBinding)[1]
    errors = [p for p in found if p.kind == "example_error"]
    assert len(errors) == 1
    assert errors[0].operator == "repeated_action" and "index out of bounds" in errors[0].message


def slow_library(data: dict):
    """``lit_target`` made quadratic in the seen objects: within the static bound (depth 2),
    slow only when the facts carry a long list."""
    data = copy.deepcopy(data)
    o = op(data, "lit_target")
    o["condition"] = ("facts.accepted && facts.seen_objects.exists(a, facts.seen_objects.exists(b, a + b == 'never'))"
                      " || facts.toggled_type == 'no such lamp'")
    o["reads"] = ["accepted", "seen_objects", "toggled_type"]
    o["needs"] = []
    o["examples"] = [{"expected": True, "facts": {"toggled_type": "no such lamp"}}, {"expected": False}]
    return load_library(data, ALFWorldFacts, ALFWorldBinding)


def test_operator_over_budget_scores_zero_is_reported_once_and_disabled(data, caplog):
    compiled = slow_library(data)
    j = compiled.ids.index("lit_target")
    binding = ALFWorldBinding(target_type="apple", destination_type="fridge")
    long_list = ALFWorldFacts(accepted=True, toggled_type="no such lamp", location="fridge 1", location_changed=True,
                              seen_objects=[f"thing {i}" for i in range(300)])  # 90,000 pairs
    judge = compiled.episode(binding, budget_s=0.001)
    prior = np.zeros(compiled.num_operators)
    with caplog.at_level(logging.WARNING, logger="rubricgym.trca.operators"):
        rows = [judge.judge(long_list, prior) for _ in range(3)]
    want, _ = reference_judgments(compiled, long_list, binding, prior)
    assert want[j] == 1  # it would have fired ...
    for row in rows:  # ... but it went over budget: 0 from the first step on
        assert row[j] == 0
        assert np.delete(row, j).tolist() == np.delete(want, j).tolist()  # the others are untouched
    assert judge.disabled == {"lit_target"}
    assert [(i.operator, i.kind, i.step) for i in judge.incidents] == [("lit_target", "over_budget", 0)]
    assert sum("lit_target" in r.getMessage() for r in caplog.records) <= 1
    # a new episode starts with every operator enabled again (here with room for the long list)
    fresh = compiled.episode(binding, budget_s=60.0)
    assert fresh.disabled == set() and fresh.judge(long_list, prior)[j] == 1


def test_runtime_error_is_reported_once_against_its_own_operator(data):
    compiled = load_library(data, ALFWorldFacts, ALFWorldBinding)
    judge = compiled.episode(ALFWorldBinding(target_type="apple"))
    for _ in range(5):
        judge.judge({"repeated": "yes", "parsed": True}, np.zeros(compiled.num_operators))
    assert judge.errors["repeated_action"] == 5  # counted every step ...
    reported = [i for i in judge.incidents if i.operator == "repeated_action"]
    assert len(reported) == 1 and "No such overload" in reported[0].message  # ... reported once
    assert all(i.kind == "error" for i in judge.incidents)
    assert len({i.operator for i in judge.incidents}) == len(judge.incidents)


def test_the_reward_record_shows_incidents_once_and_disabled_operators():
    """Through the reward component: an erroring condition is reported in the step's record once,
    against its own operator; other operators are not blamed."""
    import cel
    from toy_envs import CounterAdapter

    from rubricgym.env import RubricEnv
    from rubricgym.trca import TRCAReward
    from rubricgym.trca.library import OperatorLibrary
    from rubricgym.trca.operators import CompiledLibrary, find_references

    data = {
        "name": "counter-errors", "benchmark": "Counter", "facts_model": "", "lambda": 0.8,
        "budgets": {"r_evi": 0.2, "r_inval": 0.2, "r_exec": 0.5},
        "operators": [
            {"id": "ok_evidence", "category": "evidence", "description": "the step was accepted",
             "reads": ["accepted"], "needs": [], "condition": "facts.accepted",
             "examples": [{"expected": True, "facts": {"accepted": True}, "binding": {}},
                          {"expected": False, "facts": {"accepted": False}, "binding": {}}]},
            {"id": "broken", "category": "invalidity", "description": "divides by the value",
             "reads": ["value"], "needs": [], "condition": "1 / (facts.value - facts.value) > 0",
             "examples": []},
            {"id": "ok_exec", "category": "execution", "description": "value reached 2",
             "reads": ["value"], "needs": [], "condition": "facts.value == 2",
             "examples": [{"expected": True, "facts": {"value": 2}, "binding": {}},
                          {"expected": False, "facts": {"value": 1}, "binding": {}}]},
        ],
    }
    lib = OperatorLibrary.model_validate(data)
    programs = [cel.compile(o.condition) for o in lib.operators]
    compiled = CompiledLibrary(lib, programs, [find_references(o.condition, p) for o, p in zip(lib.operators, programs)])
    env = TRCAReward(RubricEnv(CounterAdapter(), max_steps=3), library=compiled)
    env.reset(seed=0, options={"task_id": "reach-3"})
    records = [env.step("<action>inc</action>")[4]["rubric"]["trca"] for _ in range(2)]
    assert [i["operator"] for i in records[0]["incidents"]] == ["broken"] and records[1]["incidents"] == []
    assert records[0]["judgments"]["broken"] == 0 and records[0]["judgments"]["ok_evidence"] == 1
    assert records[1]["judgments"]["ok_exec"] == 1
    env.close()
