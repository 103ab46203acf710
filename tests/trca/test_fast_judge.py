"""The fast judgment path (batched programs, flat variables, changed-fields-only updates)
gives exactly the straightforward judgments: same rows, same errors, step after step."""

from __future__ import annotations

import cel
import numpy as np
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rubricgym.adapters.alfworld.facts import ALFWorldBinding, ALFWorldFacts
from rubricgym.credit.trca import coverage
from rubricgym.registration import operator_library
from rubricgym.trca import load_library
from rubricgym.trca.library import OperatorLibrary
from rubricgym.trca.operators import BATCH_SIZE, CompiledLibrary, find_references, reference_judgments

ALFWORLD = operator_library("ALFWorld")

# Conditions that err or return non-Booleans on some data (a validated library would refuse
# most of them; the judge must still agree with the straightforward path on them).
FRAGILE = {
    "first_held": "facts.inventory[0] == binding.target_type + ' 1'",  # errs on an empty inventory
    "location_or_flag": "facts.parsed ? facts.location != '' : facts.location",  # a string when unparsed
    "seen_count": "size(facts.seen_objects) / (size(facts.inventory) - 1) > 0",  # division by zero at 1 item
    "bad_regex_sometimes": "facts.repeated && facts.location.matches('(')",  # errs only when repeated
    "uses_has": "has(facts.opened) && facts.opened != '' || has(binding.light_type) && binding.quantity > 1",
}


def fragile_library(extra: int = 0) -> CompiledLibrary:
    """The ALFWorld library plus FRAGILE operators (and ``extra`` copies, to span batches),
    compiled without the example check."""
    data = yaml.safe_load(ALFWORLD.read_text())
    ops = list(data["operators"])
    conditions = dict(FRAGILE) | {f"copy_{k}": ops[k % len(ops)]["condition"] for k in range(extra)}
    for op_id, condition in conditions.items():
        ops.append({"id": op_id, "category": "evidence", "description": op_id, "condition": condition,
                    "examples": [{"expected": True}, {"expected": False}]})
    lib = OperatorLibrary.model_validate(dict(data, operators=ops))
    programs = [cel.compile(o.condition) for o in lib.operators]
    return CompiledLibrary(lib, programs, [find_references(o.condition, p) for o, p in zip(lib.operators, programs)])


names = st.sampled_from(["apple", "fridge", "desklamp", "bowl", "", "a'b", 'q"uote', "ünï"])
typed_facts = st.builds(
    ALFWorldFacts,
    parsed=st.booleans(), admissible=st.sampled_from([None, True, False]), accepted=st.booleans(),
    repeated=st.booleans(), state_changed=st.booleans(), nothing_happens=st.booleans(),
    location=names.map(lambda n: f"{n} 1" if n else ""), location_changed=st.booleans(),
    new_object_types=st.lists(names, max_size=3), seen_objects=st.lists(names, max_size=4),
    inventory=st.lists(names.map(lambda n: f"{n} 1"), max_size=2),
    picked_up_type=names, placed_type=names, placed_in_type=names, opened=names, toggled_type=names,
    cleaned_type=names, heated_type=names, cooled_type=names,
)
odd_value = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), names, st.lists(names, max_size=2),
                      st.tuples(names))
loose_facts = st.dictionaries(  # dict facts: missing keys, wrong types (True vs 1 vs "x"), tuples
    st.sampled_from(["parsed", "accepted", "repeated", "location", "inventory", "seen_objects",
                     "new_object_types", "opened", "picked_up_type", "admissible", "state_changed"]),
    odd_value, max_size=6)
bindings = st.one_of(
    st.builds(ALFWorldBinding, target_type=names, destination_type=names, light_type=names,
              transformation=st.sampled_from(["", "clean", "heat", "cool", "light"]), quantity=st.integers(1, 2)),
    st.dictionaries(st.sampled_from(["target_type", "quantity", "transformation"]), odd_value, max_size=3),
)


def agree(compiled: CompiledLibrary, steps, binding, priors) -> None:
    judge = compiled.episode(binding)
    carried = np.zeros(compiled.num_operators)
    for t, facts in enumerate(steps):
        prior = carried if priors is None else priors[t]
        before = dict(judge.errors)
        row = judge.judge(facts, prior)
        want, errors = reference_judgments(compiled, facts, binding, prior)
        assert row.dtype == np.int8 and row.tolist() == want.tolist(), f"step {t}"
        assert {k for k, n in judge.errors.items() if n != before.get(k, 0)} == set(errors), f"step {t}"
        assert all(judge.last_error[k] == errors[k][:500] for k in errors)
        carried = coverage(row[None, :], compiled.coverable, carried)[-1]
    # each failing operator is reported once, against itself
    reported = [(i.operator, i.kind) for i in judge.incidents]
    assert len(reported) == len(set(reported)) and {o for o, _ in reported} == set(judge.errors)


@settings(max_examples=150, deadline=None)
@given(st.lists(typed_facts, min_size=1, max_size=12), bindings)
def test_fast_path_equals_reference_on_typed_facts(steps, binding):
    agree(load_library(ALFWORLD), steps, binding, None)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(typed_facts, loose_facts), min_size=1, max_size=12), bindings, st.data())
def test_fast_path_equals_reference_with_erring_conditions(steps, binding, data):
    compiled = fragile_library()
    priors = None
    if data.draw(st.booleans()):  # arbitrary coverage, not only the carried one
        priors = [np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=compiled.num_operators,
                                              max_size=compiled.num_operators))) for _ in steps]
    agree(compiled, steps, binding, priors)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(typed_facts, loose_facts), min_size=1, max_size=8), bindings)
def test_fast_path_equals_reference_across_several_batches(steps, binding):
    compiled = fragile_library(extra=2 * BATCH_SIZE)
    assert compiled.num_operators > 2 * BATCH_SIZE
    agree(compiled, steps, binding, None)


def test_in_place_mutation_of_a_list_is_seen():
    compiled = load_library(ALFWORLD)
    binding = ALFWorldBinding(target_type="apple", light_type="desklamp")
    facts = ALFWorldFacts(accepted=True, toggled_type="desklamp", inventory=["bowl 1"])
    judge = compiled.episode(binding)
    lit = compiled.ids.index("lit_target")
    assert judge.judge(facts, np.zeros(compiled.num_operators))[lit] == 0
    facts.inventory.append("apple 1")  # the same list object, changed
    assert judge.judge(facts, np.zeros(compiled.num_operators))[lit] == 1


def test_a_new_episode_reusing_a_finished_context_equals_the_reference():
    """A finished episode's context is handed to the next one (only differences converted):
    bindings, coverage and facts from the earlier episode must not leak into the new one."""
    compiled = load_library(ALFWORLD)
    first_binding = ALFWorldBinding(target_type="apple", destination_type="fridge", transformation="cool", quantity=2)
    first = compiled.episode(first_binding)
    held = ALFWorldFacts(accepted=True, picked_up_type="apple", inventory=["apple 1"], location="fridge 1",
                         location_changed=True, placed_type="apple", placed_in_type="fridge")
    first.judge(held, np.ones(compiled.num_operators))
    del first  # its context is retired
    for binding in (first_binding, ALFWorldBinding(target_type="mug", destination_type="shelf"), {}):
        judge = compiled.episode(binding)
        for facts in (held, ALFWorldFacts(), held):
            prior = np.zeros(compiled.num_operators)
            assert judge.judge(facts, prior).tolist() == reference_judgments(compiled, facts, binding, prior)[0].tolist()
        del judge
    alive = [compiled.episode(first_binding) for _ in range(3)]  # live judges never share a context
    assert len({id(j._context) for j in alive}) == 3
