"""Exact match with the standard (SQuAD / Search-R1) answer normalization, and the form of
an answer. Plain string operations only: linear in the input, no patterns on untrusted text."""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Iterable

ARTICLES = frozenset({"a", "an", "the"})
_PUNCT = str.maketrans("", "", string.punctuation)
MONTHS = frozenset("january february march april may june july august september october november december".split())
NUMBER_WORDS = frozenset("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                         "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
                         "eighty ninety hundred thousand million billion".split())


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    words = text.lower().translate(_PUNCT).split()
    return " ".join(w for w in words if w not in ARTICLES)


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 when the normalized prediction equals any normalized gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


def normalize_query(text: str) -> str:
    """A query's comparison form: lower-case, punctuation removed, single spaces (articles kept:
    they change BM25 nothing but do change what a person typed)."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().translate(_PUNCT).split())


def is_year(word: str) -> bool:
    return len(word) == 4 and word.isdigit() and word[0] in "12"


def is_number(word: str) -> bool:
    return word.replace(",", "").replace(".", "").isdigit() or word in NUMBER_WORDS


def answer_kind(answer: str) -> str:
    """yes_no | date | number | entity ('' for an empty answer): the answer's surface form."""
    words = normalize_answer(answer).split()
    if not words:
        return ""
    if words in (["yes"], ["no"]):
        return "yes_no"
    raw = [w.strip(string.punctuation) for w in answer.lower().split()]
    raw = [w for w in raw if w]
    if any(is_year(w) for w in raw) or any(w in MONTHS for w in raw):
        return "date"
    if raw and all(is_number(w) for w in raw):
        return "number"
    return "entity"


def value_kinds(text: str) -> list[str]:
    """Kinds of values a text contains: 'date' (a year or month), 'number' (any other number)."""
    kinds: set[str] = set()
    for raw in text.lower().split():
        word = raw.strip(string.punctuation)
        if not word:
            continue
        if is_year(word) or word in MONTHS:
            kinds.add("date")
        elif word.replace(",", "").replace(".", "").isdigit():
            kinds.add("number")
    return sorted(kinds)


def contains_phrase(haystack_normalized: str, needle: str) -> bool:
    """``needle`` (normalized here) occurs as whole words in an already normalized text."""
    n = normalize_answer(needle)
    return bool(n) and f" {n} " in f" {haystack_normalized} "
