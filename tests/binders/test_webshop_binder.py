"""WebShop binder on goals in the published instruction format, plus fuzz and schema checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from rubricgym.adapters.webshop import WebShopBinding, bind_task

CASES = [
    ("i need a long clip-in hair extension which is natural looking, and price lower than 40.00 dollars",
     "long clip-in hair extension", ["natural looking"], {}, 40.0),
    ("Find me slim fit, machine wash men's dress shirts with short sleeve, color: navy, size: x-large, and price lower than 50.00 dollars",
     "men's dress shirts", ["slim fit", "machine wash", "short sleeve"], {"color": "navy", "size": "x-large"}, 50.0),
    ("i am looking for a gluten free and non gmo pasta in the size of 16 ounce, and price lower than 30.00 dollars",
     "pasta", ["gluten free", "non gmo"], {"size": "16 ounce"}, 30.0),
    ("i want a high quality hair brush that is easy to use, and price lower than 20.00 dollars",
     "hair brush", ["high quality", "easy to use"], {}, 20.0),
    ("i'm looking for a pair of women's running shoes in black color with rubber sole, size 8, and price lower than 60.00 dollars",
     "women's running shoes", ["rubber sole"], {"color": "black", "size": "8"}, 60.0),
    ("WebShop [SEP] Instruction: [SEP] i would like a 3 pack of sugar free chocolate bars for a keto diet, and price lower than 25.00 dollars [SEP] Search",
     "chocolate bars", ["sugar free", "keto diet"], {"quantity": "3 pack"}, 25.0),
    ("i want a queen size bed frame with storage, and price lower than 300.00 dollars",
     "queen size bed frame", ["storage"], {}, 300.0),
    ("i need a wireless bluetooth headphones with noise cancelling, color: white, and price lower than 100.00 dollars",
     "bluetooth headphones", ["wireless", "noise cancelling"], {"color": "white"}, 100.0),
    ("i am looking for a water resistant mascara that is long lasting, and price lower than 15.00 dollars",
     "mascara", ["water resistant", "long lasting"], {}, 15.0),
    ("i would like a face moisturizer for sensitive skin, scent: unscented, size: 1.7 fl oz (pack of 1), and price lower than 35.00 dollars",
     "face moisturizer", ["sensitive skin"], {"scent": "unscented", "size": "1.7 fl oz (pack of 1)"}, 35.0),
    ("find me a stainless steel water bottle in the color blue", "water bottle", ["stainless steel"], {"color": "blue"}, None),
    ("i need a phone case", "phone case", [], {}, None),
]


@pytest.mark.parametrize("text,product,attributes,options,price", CASES)
def test_published_goal_format(text, product, attributes, options, price):
    b = bind_task(text)
    assert b.product_type == product
    assert b.attributes == attributes
    assert b.options == options
    assert b.price_upper == price


def test_unparseable_fields_stay_empty():
    b = bind_task("")
    assert b == WebShopBinding()
    assert bind_task("and price lower than 12.50 dollars") == WebShopBinding(price_upper=12.5)
    assert bind_task("i need a " + "x" * 500).product_type == ""  # not a noun phrase: left empty


def test_schema_and_determinism():
    schema = WebShopBinding.json_schema()
    assert set(schema["properties"]) == {"product_type", "attributes", "options", "price_upper"}
    text = CASES[1][0]
    assert bind_task(text) == bind_task(text)
    assert WebShopBinding.model_validate_json(bind_task(text).model_dump_json()) == bind_task(text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400) | st.from_regex(r"[a-z ,:.$0-9]{0,200}", fullmatch=True))
def test_any_text_binds(text):
    b = bind_task(text)
    assert isinstance(b, WebShopBinding)
    assert WebShopBinding.model_validate(b.model_dump()) == b
    assert b == bind_task(text)
