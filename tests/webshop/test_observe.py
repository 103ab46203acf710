"""Parsing and fact extraction on recorded observation strings in WebShop's text format
(``observation_mode="text"``: visible text nodes joined with " [SEP] ")."""

from __future__ import annotations

import pytest

from rubricgym.adapters.webshop.binder import bind_task
from rubricgym.adapters.webshop.observe import ObservedShop, ParsedCommand, parse_command, parse_page

GOAL = "i would like a 3 ounce bottle of bright citrus deodorant for sensitive skin, and price lower than 50.00 dollars"
HEAD = f"WebShop [SEP] Instruction: [SEP] {GOAL} [SEP] "
SEARCH_PAGE = HEAD + "Search"
RESULTS_PAGE = HEAD + (
    "Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] "
    "B078GWRC1J [SEP] Bright Citrus Deodorant by Earth Mama | Natural and Safe for Sensitive Skin, Pregnancy and "
    "Breastfeeding, Contains Organic Calendula 3-Ounce [SEP] $10.99 [SEP] "
    "B078GTKVXY [SEP] Ginger Fresh Deodorant by Earth Mama | Natural and Safe for Sensitive Skin, Pregnancy and "
    "Breastfeeding, Contains Organic Calendula 3-Ounce [SEP] $10.99 [SEP] "
    "B08KBVJ4XN [SEP] Barrel and Oak - Aluminum-Free Deodorant, Deodorant for Men, Essential Oil-Based Scent, "
    "24-Hour Odor Protection, Cedar & Patchouli Blend, Gentle on Sensitive Skin (Mountain Sage, 2.7 oz, 2-Pack) "
    "[SEP] $15.95 to $20.00"
)
RESULTS_CLICKS = ["back to search", "next >", "b078gwrc1j", "b078gtkvxy", "b08kbvj4xn"]
ITEM_PAGE = HEAD + (
    "Back to Search [SEP] < Prev [SEP] scent [SEP] assorted scents [SEP] bright citrus [SEP] calming lavender "
    "[SEP] ginger fresh [SEP] simply non-scents [SEP] size [SEP] travel set (4-pack) [SEP] 3 ounce (pack of 1) "
    "[SEP] 3-ounce (2-pack) [SEP] Bright Citrus Deodorant by Earth Mama | Natural and Safe for Sensitive Skin, "
    "Pregnancy and Breastfeeding, Contains Organic Calendula 3-Ounce [SEP] Price: $10.99 [SEP] Rating: N.A. "
    "[SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
)
ITEM_CLICKS = ["back to search", "< prev", "assorted scents", "bright citrus", "calming lavender", "ginger fresh",
               "simply non-scents", "travel set (4-pack)", "3 ounce (pack of 1)", "3-ounce (2-pack)",
               "description", "features", "reviews", "buy now"]
FEATURES_PAGE = HEAD + (
    "Back to Search [SEP] < Prev [SEP] NEW from Earth Mama (formerly Earth Mama Angel Baby), formulated "
    "especially for pregnancy, breastfeeding and sensitive skin [SEP] Contains organic grapefruit, tangerine "
    "and calendula"
)
SUB_CLICKS = ["back to search", "< prev"]
DONE_PAGE = ("Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] (Paste it in your MTurk "
             "interface.) [SEP] Purchased [SEP] asin [SEP] B078GWRC1J [SEP] options [SEP] {} [SEP] "
             "Your score (min 0.0, max 1.0) [SEP] 0.75")


@pytest.mark.parametrize("text,expected", [
    ("search[3 Ounce Bright Citrus Deodorant]", ParsedCommand("search", "3 ounce bright citrus deodorant")),
    ("click[B078GWRC1J]", ParsedCommand("click", "b078gwrc1j")),
    ("click[< Prev]", ParsedCommand("click", "< prev")),
    ("  click[Buy Now] ", ParsedCommand("click", "buy now")),
    ("click[3 ounce (pack of 1)]", ParsedCommand("click", "3 ounce (pack of 1)")),
    ("search[]", ParsedCommand("other")),
    ("click[ ]", ParsedCommand("other")),
    ("Click[Buy Now]", ParsedCommand("other")),  # WebShop matches the name exactly
    ("buy now", ParsedCommand("other")),
    ("search[shoes", ParsedCommand("other")),
    ("think[what next]", ParsedCommand("other")),
    ("", ParsedCommand("other")),
    ("search[" + "x" * 600 + "]", ParsedCommand("other")),
])
def test_parse_command(text, expected):
    assert parse_command(text) == expected


def test_pages_are_classified_and_parsed():
    assert parse_page(SEARCH_PAGE, ["search"], True).page == "search"
    results = parse_page(RESULTS_PAGE, RESULTS_CLICKS, False)
    assert (results.page, results.results_page, results.total_results) == ("results", 1, 50)
    assert [a for a, _, _ in results.listed] == ["b078gwrc1j", "b078gtkvxy", "b08kbvj4xn"]
    assert results.listed[0][1].startswith("Bright Citrus Deodorant") and results.listed[2][2] == 15.95
    item = parse_page(ITEM_PAGE, ITEM_CLICKS, False)
    assert item.page == "item" and item.price == 10.99 and item.rating == "N.A."
    assert item.title.startswith("Bright Citrus Deodorant by Earth Mama")
    assert item.options == {
        "scent": ["assorted scents", "bright citrus", "calming lavender", "ginger fresh", "simply non-scents"],
        "size": ["travel set (4-pack)", "3 ounce (pack of 1)", "3-ounce (2-pack)"],
    }
    features = parse_page(FEATURES_PAGE, SUB_CLICKS, False, section="features")
    assert features.page == "features" and "organic grapefruit" in features.section_text
    assert parse_page(DONE_PAGE, [], False).page == "done"


def test_observed_episode_facts():
    shop = ObservedShop(binding=bind_task(GOAL))
    shop.start(SEARCH_PAGE, ["search"], True)
    assert shop.state_facts()["page"] == "search" and shop.stage() == "search"

    f = shop.observe(parse_command("search[3 ounce bright citrus deodorant]"), ["search"], RESULTS_PAGE,
                     RESULTS_CLICKS, False)
    assert f["page"] == "results" and f["query"] == "3 ounce bright citrus deodorant"
    assert f["new_products"] == ["b078gwrc1j", "b078gtkvxy", "b08kbvj4xn"] and len(f["new_titles"]) == 3
    sig_results = shop.signature()

    f = shop.observe(parse_command("click[b078gwrc1j]"), RESULTS_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)
    assert f["opened_product"] and f["entered_item"] and f["product"] == "b078gwrc1j"
    assert f["product_price"] == 10.99 and "3 ounce (pack of 1)" in f["option_values"]
    assert f["option_groups"] == ["scent", "size"]

    f = shop.observe(parse_command("click[3 ounce (pack of 1)]"), ITEM_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)
    assert f["selected_option"] == "3 ounce (pack of 1)" and f["selected_options"] == {"size": "3 ounce (pack of 1)"}
    assert not f["entered_item"] and not f["opened_product"]

    f = shop.observe(parse_command("click[nonexistent]"), ITEM_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)
    assert f["click_rejected"] and f["selected_option"] == "" and f["selected_options"] == {"size": "3 ounce (pack of 1)"}

    f = shop.observe(parse_command("click[features]"), ITEM_CLICKS, FEATURES_PAGE, SUB_CLICKS, False)
    assert f["page"] == "features" and "calendula" in f["section_text"] and f["product"] == "b078gwrc1j"

    f = shop.observe(parse_command("click[< prev]"), SUB_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)
    assert f["page"] == "item" and f["entered_item"] and f["selected_options"] == {"size": "3 ounce (pack of 1)"}

    f = shop.observe(parse_command("click[buy now]"), ITEM_CLICKS, DONE_PAGE, [], False)
    assert f["purchased"] and f["purchased_product"] == "b078gwrc1j" and f["purchased_price"] == 10.99
    assert f["purchased_title"].startswith("bright citrus deodorant") and f["stage"] == "bought"
    assert shop.signature() != sig_results


def test_going_back_to_results_clears_the_selection():
    shop = ObservedShop()
    shop.start(RESULTS_PAGE, RESULTS_CLICKS, False)
    shop.observe(parse_command("click[b078gwrc1j]"), RESULTS_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)
    shop.observe(parse_command("click[bright citrus]"), ITEM_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)
    f = shop.observe(parse_command("click[< prev]"), ITEM_CLICKS, RESULTS_PAGE, RESULTS_CLICKS, False)
    assert f["page"] == "results" and f["selected_options"] == {} and f["product"] == ""
    assert f["new_products"] == []  # all three were listed on the starting page



def test_first_event_marks_only_what_is_new_this_episode():
    shop = ObservedShop(binding=bind_task(GOAL))
    shop.start(SEARCH_PAGE, ["search"], True)
    steps = [("search[citrus deodorant]", ["search"], RESULTS_PAGE, RESULTS_CLICKS, True),
             ("click[b078gwrc1j]", RESULTS_CLICKS, ITEM_PAGE, ITEM_CLICKS, True),
             ("click[3 ounce (pack of 1)]", ITEM_CLICKS, ITEM_PAGE, ITEM_CLICKS, True),
             ("click[3-ounce (2-pack)]", ITEM_CLICKS, ITEM_PAGE, ITEM_CLICKS, True),
             ("click[3 ounce (pack of 1)]", ITEM_CLICKS, ITEM_PAGE, ITEM_CLICKS, False),  # chosen before
             ("click[features]", ITEM_CLICKS, FEATURES_PAGE, SUB_CLICKS, True),
             ("click[< prev]", SUB_CLICKS, ITEM_PAGE, ITEM_CLICKS, False),  # the item page again
             ("click[features]", ITEM_CLICKS, FEATURES_PAGE, SUB_CLICKS, False),
             ("click[< prev]", SUB_CLICKS, ITEM_PAGE, ITEM_CLICKS, False),
             ("click[nonexistent]", ITEM_CLICKS, ITEM_PAGE, ITEM_CLICKS, False),  # rejected: nothing new
             ("click[< prev]", ITEM_CLICKS, RESULTS_PAGE, RESULTS_CLICKS, False),  # the same results page
             ("click[b078gwrc1j]", RESULTS_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)]  # the same product
    for action, before, text, clicks, first in steps:
        f = shop.observe(parse_command(action), before, text, clicks, False)
        assert f["first_event"] is first, action
    shop.observe(parse_command("click[< prev]"), ITEM_CLICKS, RESULTS_PAGE, RESULTS_CLICKS, False)
    f = shop.observe(parse_command("click[b078gtkvxy]"), RESULTS_CLICKS, ITEM_PAGE, ITEM_CLICKS, False)
    assert f["first_event"] and f["product"] == "b078gtkvxy"  # another product is new
    f = shop.observe(parse_command("click[buy now]"), ITEM_CLICKS, DONE_PAGE, [], False)
    assert f["first_event"] and f["purchased"]
    shop.start(SEARCH_PAGE, ["search"], True)  # a new episode forgets what the last one saw
    f = shop.observe(parse_command("search[citrus deodorant]"), ["search"], RESULTS_PAGE, RESULTS_CLICKS, False)
    assert f["first_event"]

def test_garbage_pages_never_raise():
    for text in ("", "[SEP]", "Price:", "< Prev [SEP] Price: $x", "Page 1 (Total results: 9) [SEP] zzz", "x" * 10000):
        for clicks in ([], ["buy now"], ["zzz"]):
            parse_page(text, clicks, False)


def test_html_template_variants_parse_too():
    """WebShop's HTML templates render "Instruction: <goal>" as one node, a "Current Query"
    line, "Page 1 (1-10) of 50 total results" and "< Back to Results"; the parser reads both."""
    head = f"Instruction: {GOAL} [SEP] Current Query: deodorant [SEP] "
    results = head + ("Results [SEP] Page 2 (11-20) of 50 total results [SEP] Back to Search [SEP] < Prev [SEP] "
                      "Next > [SEP] B078GWRC1J [SEP] Bright Citrus Deodorant [SEP] $10.99")
    view = parse_page(results, ["back to search", "< prev", "next >", "b078gwrc1j"], False)
    assert (view.page, view.results_page, view.total_results) == ("results", 2, 50)
    assert view.listed == [("b078gwrc1j", "Bright Citrus Deodorant", 10.99)]
    item = head + ("Back to Search [SEP] < Back to Results [SEP] size [SEP] small [SEP] large [SEP] Bright Citrus "
                   "Deodorant [SEP] Price: $10.99 [SEP] Rating: 4.5 [SEP] Description [SEP] Buy Now")
    view = parse_page(item, ["back to search", "< back to results", "small", "large", "description", "buy now"], False)
    assert view.page == "item" and view.options == {"size": ["small", "large"]} and view.rating == "4.5"
