"""Exact match and its normalization: the standard (SQuAD / Search-R1) examples, plus properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.adapters.searchqa.answers import answer_kind, exact_match, normalize_answer, normalize_query, value_kinds


@pytest.mark.parametrize("raw,normalized", [
    ("The Beatles", "beatles"),
    ("  A  cat sat\ton  the mat. ", "cat sat on mat"),
    ("U.S.A.", "usa"),
    ("Barack Obama!", "barack obama"),
    ("an apple", "apple"),
    ("Theatre", "theatre"),             # an article only as a whole word
    ("the the", ""),
    ("12,400", "12400"),
    ("Rock 'n' Roll", "rock n roll"),
    ("", ""),
])
def test_normalization_standard_examples(raw, normalized):
    assert normalize_answer(raw) == normalized


@pytest.mark.parametrize("prediction,golds,score", [
    ("the Beatles", ["The Beatles"], 1.0),
    ("Beatles.", ["The Beatles", "Fab Four"], 1.0),
    ("fab four", ["The Beatles", "Fab Four"], 1.0),
    ("The Rolling Stones", ["The Beatles"], 0.0),
    ("Beatles band", ["The Beatles"], 0.0),   # exact, not containment
    ("1954", ["1954"], 1.0),
    ("in 1954", ["1954"], 0.0),
    ("12400", ["12,400"], 1.0),
    ("", ["x"], 0.0),
    ("the", [""], 1.0),                       # both normalize to empty: equal, as in the standard script
])
def test_exact_match(prediction, golds, score):
    assert exact_match(prediction, golds) == score


@given(st.text(max_size=200))
def test_normalization_is_idempotent_and_em_reflexive(text):
    once = normalize_answer(text)
    assert normalize_answer(once) == once
    assert exact_match(text, [text]) == 1.0


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=100))
def test_em_ignores_ascii_case_and_surrounding_punctuation(text):
    assert exact_match(f" {text.upper()}!", [text.lower()]) == 1.0


@pytest.mark.parametrize("answer,kind", [
    ("yes", "yes_no"), ("No.", "yes_no"), ("1954", "date"), ("March 3", "date"), ("12,400", "number"),
    ("forty two", "number"), ("Velmora", "entity"), ("Asker River", "entity"), ("", ""), ("the", ""),
])
def test_answer_kind(answer, kind):
    assert answer_kind(answer) == kind


def test_value_kinds_and_query_normalization():
    assert value_kinds("founded in 1801, it has 12,400 residents") == ["date", "number"]
    assert value_kinds("no values here") == []
    assert normalize_query("  Who  FOUNDED Korvath-Instruments? ") == "who founded korvathinstruments"
