"""WebShop's published reward on hand-computed cases (attribute, option, price, type factor)."""

from __future__ import annotations

import pytest

from rubricgym.adapters.webshop.catalogue import Goal, Product
from rubricgym.adapters.webshop.reward import normalize_color, purchase_reward, title_nouns, type_factor

GOAL_TITLE = "Sonova Studio Headphones with Noise Cancelling"


def product(**overrides) -> Product:
    fields = dict(
        asin="B0TESTTEST", product_type="headphones", category="electronics", query="over-ear headphones",
        product_category="electronics › audio › headphones", Title=GOAL_TITLE, price=59.99,
        Description="Meet the Sonova Studio Headphones.", BulletPoints=["Plush ear cushions: soft"],
        Attributes=["noise cancelling", "foldable design"], options={"color": ["black", "navy blue"],
                                                                     "size": ["large", "x-large"]},
    )
    fields.update(overrides)
    return Product(**fields)


def goal(**overrides) -> Goal:
    fields = dict(
        goal_id="g", split="train", asin="B0TESTTEST", category="electronics", query="over-ear headphones",
        name=GOAL_TITLE, product_category="electronics › audio › headphones",
        instruction_text="i need headphones", attributes=["noise cancelling", "foldable design", "plush ear cushions"],
        goal_options={"color": "navy blue", "size": "large"}, price_upper=60.0,
    )
    fields.update(overrides)
    return Goal(**fields)


def test_everything_matches_scores_one():
    r = purchase_reward(product(), goal(), 59.99, {"color": "navy blue", "size": "large"})
    # attributes: 2 listed + "plush ear cushions" found in the bullet points
    assert (r.attribute_matches, r.option_matches, r.price_ok, r.r_type) == (3, 2, True, 1.0)
    assert r.reward == 1.0


@pytest.mark.parametrize("price,options,attrs,expected", [
    (59.99, {"color": "navy blue", "size": "large"}, ["noise cancelling", "waterproof"], (1 + 2 + 1) / 5),
    (60.01, {"color": "navy blue", "size": "large"}, ["noise cancelling"], (1 + 2 + 0) / 4),
    (10.00, {"color": "black", "size": "large"}, ["noise cancelling"], (1 + 1 + 1) / 4),
    (10.00, {}, ["noise cancelling"], (1 + 0 + 1) / 4),
    (10.00, {"color": "navy blue"}, ["usb c port", "waterproof"], (0 + 1 + 1) / 5),
])
def test_partial_matches(price, options, attrs, expected):
    r = purchase_reward(product(), goal(attributes=attrs), price, options)
    assert r.r_type == 1.0
    assert r.reward == pytest.approx(expected)


def test_price_bound_is_inclusive():
    assert purchase_reward(product(), goal(), 60.0, {}).price_ok
    assert not purchase_reward(product(), goal(), 60.001, {}).price_ok


def test_attribute_fuzzy_and_substring_rules():
    g = goal(goal_options={}, attributes=["noise cancelling headphones"])  # token-set ratio 100 with "noise cancelling"
    assert purchase_reward(product(), g, 1.0, {}).attribute_matches == 1
    g = goal(goal_options={}, attributes=["studio headphones"])  # substring of the title
    assert purchase_reward(product(Attributes=[]), g, 1.0, {}).attribute_matches == 1
    g = goal(goal_options={}, attributes=["waterproof"])
    assert purchase_reward(product(), g, 1.0, {}).attribute_matches == 0


def test_size_options_match_exactly_other_options_fuzzily():
    g = goal(attributes=[], goal_options={"size": "x-large", "color": "navy"})
    # "large" != "x-large" (size: exact); "navy blue" ~ "navy" (token-set ratio 100 > 85)
    r = purchase_reward(product(), g, 1.0, {"size": "large", "color": "navy blue"})
    assert r.option_matches == 1
    assert r.reward == pytest.approx((0 + 1 + 1) / 3)


def test_colour_words_are_normalised():
    assert normalize_color(" Heather  GREY ") == "heather gray"
    g = goal(attributes=[], goal_options={"color": "heather gray"})
    p = product(options={"color": ["heather grey"]})
    assert purchase_reward(p, g, 1.0, {"color": "heather grey"}).option_matches == 1


# -- the product-type factor (nouns from the pinned tagger) ------------------------------------
OTHER = dict(query="something else", product_category="home › decor › candles")


def test_tagger_nouns_used_below():
    assert title_nouns(GOAL_TITLE) == ("sonova", "studio", "headphones", "noise", "cancelling")
    assert title_nouns("Auralis Echo Headphones with Fast Charging") == (
        "auralis", "echo", "headphones", "fast", "charging")
    assert title_nouns("Leather Wallet with Cable") == ("leather", "wallet", "cable")


def test_same_query_or_two_shared_categories_keep_factor_one():
    p = product(Title="Auralis Echo Headphones with Fast Charging")  # title overlap 1/5 = 0.2
    assert type_factor(p, goal())[0] == 1.0  # same query
    p2 = product(Title="Auralis Echo Headphones with Fast Charging", query="x",
                 product_category="electronics › audio › speakers")
    assert type_factor(p2, goal())[:3] == (1.0, False, True)


def test_wrong_type_factors():
    # overlap exactly 0.2 (not > 0.2), no query or category match -> 0.5
    p = product(Title="Auralis Echo Headphones with Fast Charging", **OTHER)
    r_type, _, _, score = type_factor(p, goal())
    assert (r_type, score) == (0.5, pytest.approx(0.2))
    full = purchase_reward(p, goal(attributes=["noise cancelling"], goal_options={}), 1.0, {})
    assert full.reward == pytest.approx(0.5 * (1 + 1) / 2)  # attribute listed, price ok, halved
    # no shared noun -> 0.0, whatever else matches
    wallet = product(Title="Leather Wallet with Cable", **OTHER)
    assert type_factor(wallet, goal())[0] == 0.0
    assert purchase_reward(wallet, goal(), 1.0, {"color": "navy blue", "size": "large"}).reward == 0.0
    # overlap 1/14 < 0.1 -> 0.1
    long_name = ("Sonova Studio Headphones with Noise Cancelling, Travel Case, Charging Cable, Desk Stand "
                 "and Airplane Adapter Kit")
    assert len(title_nouns(long_name)) == 14
    r_type, _, _, score = type_factor(wallet, goal(name=long_name))
    assert score == pytest.approx(1 / 14) and r_type == 0.1


def test_goal_without_nouns_scores_title_as_point_two():
    assert type_factor(product(**OTHER), goal(name="!!!"))[:4] == (0.5, False, False, 0.2)


def test_title_score_divides_by_the_goal_nouns_with_repeats_as_upstream():
    """upstream's get_type_reward: distinct shared nouns over the goal title's noun tokens,
    repeats counted. Goal "Yoga mat with yoga strap and yoga block" (nouns yoga, mat, yoga,
    strap, yoga, block), bought "Yoga mat" (yoga, mat): 2/6, where distinct nouns gave 2/4."""
    name = "Yoga mat with yoga strap and yoga block"
    assert title_nouns(name) == ("yoga", "mat", "yoga", "strap", "yoga", "block")
    mat = product(Title="Yoga mat", **OTHER)
    r_type, _, _, score = type_factor(mat, goal(name=name))
    assert score == pytest.approx(2 / 6) and r_type == 1.0  # still above 0.2
