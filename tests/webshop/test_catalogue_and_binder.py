"""The bundled catalogue is what its committed generator writes, and the task binder reads
the generated instructions as intended."""

from __future__ import annotations

import pytest

from rubricgym.adapters.webshop.binder import bind_task
from rubricgym.adapters.webshop.catalogue import bundled_catalogue
from rubricgym.adapters.webshop.generate import TYPES, generate

NOUNS = {t.query: t.noun for t in TYPES}


@pytest.mark.slow
def test_generator_reproduces_the_committed_catalogue():
    assert generate().model_dump() == bundled_catalogue().model_dump()


def test_binder_on_generated_instructions():
    for goal in bundled_catalogue().goals:
        b = bind_task(goal.instruction_text)
        assert b.product_type == NOUNS[goal.query], goal.instruction_text
        assert b.options == goal.goal_options, goal.instruction_text
        assert b.price_upper == goal.price_upper
        assert set(b.attributes) == set(goal.attributes), goal.instruction_text
