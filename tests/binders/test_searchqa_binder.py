"""SearchQA binder on NQ / HotpotQA style questions, plus fuzz and schema checks."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings, strategies as st

from rubricgym.adapters.searchqa import SearchQABinding, bind_task

CASES = [
    ("who sings does he love me with reba", "person", [], "sings he love me reba", []),
    ("when was the last time the eagles won the super bowl", "date", [], "time eagles won super bowl", ["last"]),
    ("how many episodes are in season 2 of stranger things", "number", [], "episodes season stranger things", []),
    ("Which magazine was started first, Arthur's Magazine or First for Women?", "entity",
     ["Arthur's Magazine", "First for Women"], "magazine started", ["first"]),
    ("Were Scott Derrickson and Ed Wood of the same nationality?", "yes_no", ["Scott Derrickson", "Ed Wood"],
     "same nationality", []),
    ("What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
     "entity", ["Corliss Archer", "Kiss and Tell"], "government position held woman portrayed film", []),
    ('Who directed the film "Inception"?', "person", ["Inception"], "directed film", []),
    ("Where was the largest city in Europe before 1990 located?", "place", ["Europe"], "city located",
     ["before 1990", "largest"]),
    ("In which year did the Berlin Wall fall?", "date", ["Berlin Wall"], "year fall", []),
    ("what is the capital of australia", "entity", [], "capital australia", []),
    ("Is the Eiffel Tower taller than the Statue of Liberty?", "yes_no", ["Eiffel Tower", "Statue of Liberty"],
     "taller", []),
    ("The Oberoi family is part of a hotel company that has a head office in what city?", "place", ["Oberoi"],
     "family part hotel company head office city", []),
    ("which team won the most titles between 1990 and 2000", "entity", [], "team won titles",
     ["between 1990 and 2000", "most"]),
    ("who won the 3rd season of the voice in 2012", "person", [], "won season voice", ["in 2012", "3rd"]),
]


@pytest.mark.parametrize("question,fmt,entities,relation,constraints", CASES)
def test_question_styles(question, fmt, entities, relation, constraints):
    b = bind_task(question)
    assert b.answer_format == fmt
    assert b.target_entities == entities
    assert b.relation == relation
    assert b.constraints == constraints


def test_takes_only_the_question():
    assert list(inspect.signature(bind_task).parameters) == ["question"]


def test_no_cue_leaves_format_empty():
    assert bind_task("the capital of australia").answer_format == ""
    assert bind_task("") == SearchQABinding()


def test_schema_and_determinism():
    schema = SearchQABinding.json_schema()
    assert set(schema["properties"]) == {"answer_format", "target_entities", "relation", "constraints"}
    assert "yes_no" in str(schema["properties"]["answer_format"])
    q = CASES[5][0]
    assert bind_task(q) == bind_task(q)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400) | st.from_regex(r"[A-Za-z \"',?0-9]{0,200}", fullmatch=True))
def test_any_text_binds(text):
    b = bind_task(text)
    assert isinstance(b, SearchQABinding)
    assert SearchQABinding.model_validate(b.model_dump()) == b
    assert b == bind_task(text)
