"""Operator-library loader/validator: one test per failure kind, the CLI, and the judge."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts
from rubricgym.operator_libraries import shipped_libraries
from rubricgym.registration import operator_library
from rubricgym.registration import BENCHMARKS
from rubricgym.trca import LibraryError, check_library, load_library

ROOT = Path(__file__).resolve().parents[2]
ALFWORLD = operator_library("ALFWorld")


@pytest.fixture
def data() -> dict:
    return yaml.safe_load(ALFWORLD.read_text())


def op(data: dict, op_id: str) -> dict:
    return next(o for o in data["operators"] if o["id"] == op_id)


def problems(data: dict) -> list:
    compiled, found = check_library(data, ALFWorldFacts, ALFWorldBinding, "ALFWorld")
    assert compiled is None and found, "a broken library must not validate"
    return found


def kinds(found) -> set[tuple[str | None, str]]:
    return {(p.operator, p.kind) for p in found}


def test_shipped_alfworld_library_validates():
    compiled, found = check_library(yaml.safe_load(ALFWORLD.read_text()), ALFWorldFacts, ALFWorldBinding, "ALFWorld")
    assert found == [] and compiled is not None
    for category in ("evidence", "invalidity", "execution"):
        assert len(compiled.library.by_category(category)) == 5


def test_unknown_fact(data):
    o = op(data, "picked_target")
    o["condition"] = o["condition"].replace("facts.picked_up_type", "facts.picked_type")
    found = problems(data)
    assert ("picked_target", "unknown_fact") in kinds(found)
    assert any("facts.picked_type" in p.message for p in found)


def test_unknown_binding_field(data):
    o = op(data, "picked_target")
    o["condition"] = o["condition"].replace("binding.target_type", "binding.target")
    assert ("picked_target", "unknown_binding") in kinds(problems(data))


def test_bracket_access_is_checked_too(data):
    o = op(data, "repeated_action")
    o["condition"] = 'facts["repeatd"]'
    assert ("repeated_action", "unknown_fact") in kinds(problems(data))


def test_string_literals_are_not_references(data):
    o = op(data, "repeated_action")
    o["condition"] = '(facts.repeated || facts.revisited) && "facts.nonexistent" != ""'
    compiled, found = check_library(data, ALFWorldFacts, ALFWorldBinding)
    assert found == []


def test_reads_and_needs_must_agree(data):
    op(data, "picked_target")["reads"] = ["accepted"]
    op(data, "target_first_seen")["needs"] = ["target_type", "light_type"]
    k = kinds(problems(data))
    assert ("picked_target", "reads_mismatch") in k
    assert ("target_first_seen", "needs_mismatch") in k


def test_failing_example(data):
    op(data, "repeated_action")["examples"][0]["expected"] = False
    op(data, "repeated_action")["examples"][1]["expected"] = True
    found = problems(data)
    assert ("repeated_action", "example_failed") in kinds(found)


def test_example_with_unknown_fact_key(data):
    op(data, "repeated_action")["examples"][0]["facts"]["repeatedly"] = True
    assert ("repeated_action", "example_invalid") in kinds(problems(data))


def test_missing_positive_or_negative_example(data):
    op(data, "repeated_action")["examples"] = [{"expected": True, "facts": {"repeated": True}}]
    op(data, "parse_failure")["examples"] = [{"expected": False, "facts": {"parsed": True}}]
    k = kinds(problems(data))
    assert ("repeated_action", "missing_example") in k and ("parse_failure", "missing_example") in k


def test_empty_category(data):
    data["operators"] = [o for o in data["operators"] if o["category"] != "invalidity"]
    found = problems(data)
    assert (None, "empty_category") in kinds(found)
    assert any("invalidity" in p.message for p in found)


def test_bad_cel_syntax(data):
    op(data, "repeated_action")["condition"] = "facts.repeated &&"
    assert ("repeated_action", "syntax") in kinds(problems(data))


def test_duplicate_ids(data):
    data["operators"].append(copy.deepcopy(op(data, "repeated_action")))
    assert ("repeated_action", "duplicate_id") in kinds(problems(data))


@pytest.mark.parametrize("budgets", [{"r_evi": 0.0}, {"r_exec": -1.0}, {"r_inval": float("nan")}, {"r_evi": "lots"}])
def test_bad_budgets(data, budgets):
    data["budgets"].update(budgets)
    assert {p.kind for p in problems(data)} == {"budget"}


@pytest.mark.parametrize("field,value", [("lambda", 1.5), ("gamma", 0.0)])
def test_bad_lambda_or_gamma(data, field, value):
    data[field] = value
    assert {p.kind for p in problems(data)} == {"budget"}


def test_bad_category_names_the_operator(data):
    op(data, "repeated_action")["category"] = "penalty"
    found = problems(data)
    assert ("repeated_action", "format") in kinds(found)


def test_unknown_coverage_reference(data):
    o = op(data, "second_target_placed")
    o["condition"] = o["condition"].replace("coverage.placed_target", "coverage.repeated_action")
    assert ("second_target_placed", "unknown_coverage") in kinds(problems(data))


def test_unknown_variable(data):
    op(data, "repeated_action")["condition"] = "facts.repeated && state.dirty"
    assert ("repeated_action", "unknown_variable") in kinds(problems(data))


def test_whole_root_use_is_rejected(data):
    op(data, "repeated_action")["condition"] = "facts.repeated && size(facts) > 0"
    assert ("repeated_action", "unchecked_reference") in kinds(problems(data))


def test_model_reference_and_benchmark_mismatch(data):
    data["facts_model"] = "rubricgym.contract:Transition"
    data["benchmark"] = "WebShop"
    k = kinds(problems(data))
    assert (None, "model") in k and (None, "benchmark") in k


def test_load_library_raises_with_every_problem(data, tmp_path):
    op(data, "repeated_action")["condition"] = "facts.repeated &&"
    op(data, "picked_target")["reads"] = []
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(LibraryError) as err:
        load_library(path, ALFWorldFacts, ALFWorldBinding)
    text = str(err.value)
    assert "repeated_action: [syntax]" in text and "picked_target: [reads_mismatch]" in text


def test_runtime_errors_count_as_zero_and_never_raise(data):
    """A condition erroring on real data (a string where CEL wants a Boolean) yields 0 and is counted."""
    compiled = load_library(data, ALFWorldFacts, ALFWorldBinding)
    judge = compiled.episode(ALFWorldBinding(target_type="apple"))
    row = judge.judge({"repeated": "yes"}, np.zeros(compiled.num_operators))  # a dict missing most keys
    assert row[compiled.ids.index("repeated_action")] == 0
    assert judge.errors["repeated_action"] == 1
    assert "No such overload" in judge.last_error["repeated_action"]  # "yes" || ... has no meaning


# -- judgments are deterministic functions of (facts, binding, prior coverage) -------------------------
names = st.sampled_from(["apple", "fridge", "desklamp", "bowl", "cd", "safe", ""])
facts_st = st.builds(
    ALFWorldFacts,
    parsed=st.booleans(), admissible=st.sampled_from([None, True, False]), accepted=st.booleans(),
    repeated=st.booleans(), state_changed=st.booleans(), nothing_happens=st.booleans(),
    location=names.map(lambda n: f"{n} 1" if n else ""), location_changed=st.booleans(),
    new_object_types=st.lists(names, max_size=3), seen_objects=st.lists(names, max_size=3),
    inventory=st.lists(names.map(lambda n: f"{n} 1"), max_size=2),
    picked_up_type=names, placed_type=names, placed_in_type=names, opened=names, toggled_type=names,
    cleaned_type=names, heated_type=names, cooled_type=names,
)
binding_st = st.builds(
    ALFWorldBinding, target_type=names, destination_type=names, light_type=names,
    transformation=st.sampled_from(["", "clean", "heat", "cool", "light"]), quantity=st.integers(1, 2),
)


@given(st.lists(facts_st, min_size=1, max_size=6), binding_st, st.data())
def test_judgments_are_deterministic(steps, binding, data):
    compiled = load_library(ALFWORLD, ALFWorldFacts, ALFWorldBinding)
    first = compiled.judge_episode(steps, binding)
    again = compiled.judge_episode([ALFWorldFacts.model_validate(f.model_dump()) for f in steps],
                                   binding.model_dump())
    assert np.array_equal(first, again)
    # a step's judgment depends only on its facts, the binding and the prior coverage
    t = data.draw(st.integers(0, len(steps) - 1))
    covered = [i for i, c in zip(compiled.ids, (first[:t].max(axis=0) if t else np.zeros(len(compiled.ids))))
               if c and i in {o.id for o in compiled.operators if o.category != "invalidity"}]
    alone = compiled.judge_once(steps[t], binding, covered)
    assert np.array_equal(alone, first[t])
    assert set(np.unique(first)) <= {0, 1}


# -- CLI ----------------------------------------------------------------------------------------------
def env_id_for(benchmark: str) -> str:
    return BENCHMARKS[benchmark].env_ids[0].id


def rubricgym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rubricgym.cli", "library", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("path", shipped_libraries(), ids=lambda p: p.name)
def test_cli_validates_every_shipped_library(path):
    benchmark = yaml.safe_load(path.read_text())["benchmark"]
    result = rubricgym("validate", str(path), "--env", env_id_for(benchmark))
    assert result.returncode == 0, result.stderr
    assert ": OK against" in result.stdout


def test_cli_rejects_a_broken_library_naming_the_operator(data, tmp_path):
    o = op(data, "picked_target")
    o["condition"] = o["condition"].replace("facts.picked_up_type", "facts.picked_type")
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    result = rubricgym("validate", str(path), "--env", "ALFWorld-Rubric-v0")
    assert result.returncode == 1
    assert "picked_target: [unknown_fact] condition reads facts.picked_type" in result.stderr


def test_cli_errors(tmp_path):
    assert rubricgym("validate", str(ALFWORLD), "--env", "Nope-v0").returncode == 2
    assert rubricgym("validate", str(tmp_path / "missing.yaml")).returncode == 2
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    assert "mapping" in rubricgym("validate", str(tmp_path / "list.yaml")).stderr


def test_cli_show():
    result = rubricgym("show", str(ALFWORLD))
    assert result.returncode == 0
    assert "second_target_placed" in result.stdout and "lambda=0.8" in result.stdout


def test_a_benchmarks_library_is_its_specs():
    assert operator_library("alfworld") == operator_library("ALFWorld-Rubric-v0") == ALFWORLD
    with pytest.raises(LookupError, match="'NoSuchBenchmark'"):
        operator_library("NoSuchBenchmark")


@given(facts_st, binding_st, st.lists(st.sampled_from(["placed_target", "transformed_target"]), max_size=2))
def test_compiled_form_agrees_with_the_condition_as_written(facts, binding, covered):
    """The judge runs conditions with flat fact variables; the result equals CEL on the nested form."""
    import cel

    compiled = load_library(ALFWORLD, ALFWorldFacts, ALFWorldBinding)
    got = compiled.judge_once(facts, binding, covered)
    ctx = {"facts": facts.model_dump(mode="json"), "binding": binding.model_dump(mode="json"),
           "coverage": {o.id: o.id in covered for o in compiled.operators if o.category != "invalidity"}}
    want = [int(cel.compile(o.condition).execute(ctx)) for o in compiled.operators]
    assert got.tolist() == want


def test_flattening_leaves_string_literals_alone():
    from rubricgym.trca.operators import flatten_fact_access

    assert flatten_fact_access('''"facts['q']" == facts['r'] && has(facts.x) && binding["t"]''') == \
        '''"facts['q']" == facts__r && true && binding.t'''
    assert flatten_fact_access("facts.l.exists(o, o == 'facts.z')") == "facts__l.exists(o, o == 'facts.z')"


def test_library_models_resolve_only_through_the_registry(data, tmp_path, capsys):
    """A library naming an arbitrary module is refused without importing it (``this`` would
    print the Zen of Python on import)."""
    import sys as _sys

    _sys.modules.pop("this", None)
    bad = dict(data, facts_model="this:Facts", binding_model="os:system")
    compiled, problems = check_library(bad)
    assert compiled is None
    kinds = {(p.kind, p.message.split(":")[0]) for p in problems}
    assert ("model", "facts_model") in kinds and ("model", "binding_model") in kinds
    assert "this" not in _sys.modules and "Beautiful is better" not in capsys.readouterr().out
    path = tmp_path / "evil.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = rubricgym("validate", str(path), "--env", "ALFWorld-Rubric-v0")
    assert result.returncode == 1 and "Beautiful is better" not in result.stdout
    assert "it was not imported" in result.stderr
