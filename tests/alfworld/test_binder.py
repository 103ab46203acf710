"""The binder on every phrasing alfworld's goal templates produce, plus free-form goals."""

from __future__ import annotations

import itertools

import alfworld.gen.goal_library as glib
import pytest

from rubricgym.adapters.alfworld.binder import KIND_OF_TASK_TYPE, bind_task

OBJECTS = ["apple", "alarmclock", "soapbar", "cd", "creditcard", "butterknife"]
RECEPS = ["fridge", "countertop", "sinkbasin", "diningtable", "garbagecan", "sidetable"]
LAMPS = ["desklamp", "floorlamp"]
EXPECTED = {  # task type -> (transformation, quantity)
    "pick_and_place_simple": ("", 1),
    "pick_clean_then_place_in_recep": ("clean", 1),
    "pick_heat_then_place_in_recep": ("heat", 1),
    "pick_cool_then_place_in_recep": ("cool", 1),
    "pick_two_obj_and_place": ("", 2),
    "look_at_obj_in_light": ("light", 1),
}


def _cases():
    for task_type, (transform, qty) in EXPECTED.items():
        for template in glib.gdict[task_type]["templates"]:
            seconds = LAMPS if task_type == "look_at_obj_in_light" else RECEPS
            for obj, second in itertools.product(OBJECTS, seconds):
                text = template.format(obj=obj, recep=second, toggle=second, mrecep="")
                yield task_type, transform, qty, obj, second, text


@pytest.mark.parametrize("task_type,transform,qty,obj,second,text", list(_cases()))
def test_every_template_phrasing(task_type, transform, qty, obj, second, text):
    for instruction in (text, f"Your task is to: {text}.", f"-= Welcome =-\n\nYou see a fridge 1.\n\nYour task is to: {text}."):
        b = bind_task(instruction)
        assert b.task_type == KIND_OF_TASK_TYPE[task_type]
        assert b.target_type == obj
        assert b.transformation == transform
        assert b.quantity == qty
        if task_type == "look_at_obj_in_light":
            assert (b.light_type, b.destination_type) == (second, "")
        else:
            assert (b.destination_type, b.light_type) == (second, "")


def test_all_six_task_types_have_templates():
    for task_type in EXPECTED:
        assert len(glib.gdict[task_type]["templates"]) == 2


@pytest.mark.parametrize("text,expected", [
    ("Put a washed apple on the kitchen counter", dict(task_type="clean", target_type="apple", transformation="clean")),
    ("Examine a book under the desk lamp", dict(task_type="look", target_type="book", light_type="desklamp")),
    ("Place two pencils on the desk", dict(task_type="pick_two", target_type="pencil", quantity=2, destination_type="desk")),
    ("Chill a tomato and put it on the counter", dict(task_type="cool", target_type="tomato")),
    ("completely unrelated words", dict(task_type="pick", target_type="", destination_type="")),
])
def test_free_form_goals_fall_back_to_keywords(text, expected):
    b = bind_task(text)
    for key, value in expected.items():
        assert getattr(b, key) == value, (key, b)


def test_binder_is_deterministic():
    text = "Your task is to: heat some egg and put it in countertop."
    assert bind_task(text) == bind_task(text)
