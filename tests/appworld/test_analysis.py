"""Fast, server-free tests: grammar, code and output analysis, binder, split errors."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.adapters.appworld.binder import bind
from rubricgym.adapters.appworld.code_analysis import analyze_code, is_mutating
from rubricgym.adapters.appworld.facts import AppWorldBinding, AppWorldFacts
from rubricgym.adapters.appworld.grammar import CODE_GRAMMAR, code_of
from rubricgym.adapters.appworld.output_analysis import analyze_output
from rubricgym.contract import ParseError, facts_model_for
from rubricgym.parsing import parse_response


@pytest.mark.parametrize("response, code", [
    ("<think>plan</think><action>print(1)</action>", "print(1)"),
    ("Let me look.\n```python\nx = apis.venmo.show_profile()\nprint(x)\n```\n", "x = apis.venmo.show_profile()\nprint(x)"),
    ("```py\nprint(2)\n```", "print(2)"),
    ("```\nprint(3)\n```", "print(3)"),
    ("<action>\n```python\nprint(4)\n```\n</action>", "print(4)"),
])
def test_both_code_block_forms_parse(response, code):
    parsed = parse_response(response, CODE_GRAMMAR)
    assert parsed.ok, parsed
    assert code_of(parsed.action) == code
    start, end = parsed.action_span
    assert response[start:end] == parsed.action


@pytest.mark.parametrize("response, error", [
    ("just talk", ParseError.MISSING_TAG),
    ("```python\nprint(1)\n", ParseError.UNCLOSED_TAG),
    ("```python\na=1\n```\n```python\nb=2\n```", ParseError.MULTIPLE_ACTIONS),
    ("<action>a=1</action>\n```python\nb=2\n```", ParseError.MULTIPLE_ACTIONS),
    ("<action>  </action>", ParseError.EMPTY_ACTION),
])
def test_malformed_responses_are_classified(response, error):
    parsed = parse_response(response, CODE_GRAMMAR)
    assert not parsed.ok and parsed.error == error


@given(st.text(max_size=400))
def test_parse_never_raises(text):
    parse_response(text, CODE_GRAMMAR)


def test_code_analysis_reads_calls_without_running_them():
    code = (
        "pw = {a['account_name']: a['password'] for a in apis.supervisor.show_account_passwords()}\n"
        "tok = apis.venmo.login(username='a@b.c', password=pw['venmo'])['access_token']\n"
        "page = 0\n"
        "while True:\n"
        "    txs = apis.venmo.show_transactions(access_token=tok, page_index=page)\n"
        "    page += 1\n"
        "apis.venmo.create_transaction(access_token=tok, receiver_email='g@h.i', amount=4.5)\n"
        "import os\n"
    )
    a = analyze_code(code)
    assert a.syntax_ok and a.has_loop and a.imports == ["os"]
    names = [(c.app, c.api) for c in a.calls]
    assert names == [("supervisor", "show_account_passwords"), ("venmo", "login"),
                     ("venmo", "show_transactions"), ("venmo", "create_transaction")]
    paged = a.calls[2]
    assert paged.in_loop and paged.arguments["page_index"] == "<expr:page>"
    assert a.calls[3].arguments["amount"] == "4.5" and a.calls[3].arguments["receiver_email"] == "'g@h.i'"
    assert is_mutating("venmo", "create_transaction", None)
    assert not is_mutating("venmo", "show_transactions", None) and not is_mutating("venmo", "login", None)
    index = {"venmo": {"create_transaction": {"method": "POST"}, "show_transactions": {"method": "GET"}}}
    assert is_mutating("venmo", "create_transaction", index) and not is_mutating("venmo", "show_transactions", index)
    assert not analyze_code("def f(:\n").syntax_ok


def test_output_analysis():
    failed = analyze_output(
        "Execution failed. Traceback:\n  File \"<python-input>\", line 1, in <module>\n"
        "Exception: Response status code is 401:\n{\"message\":\"You are either not authorized or your access token is invalid.\"}")
    assert failed.execution_failed and failed.api_error and failed.api_error_codes == [401]
    assert failed.exception_type == "Exception" and "not authorized" in failed.api_error_messages[0]
    crash = analyze_output("Execution failed. Traceback:\n  x = 1/0\nZeroDivisionError: division by zero")
    assert crash.exception_type == "ZeroDivisionError" and not crash.api_error
    timeout = analyze_output("Execution failed. Traceback:\nException: Execution timed out after 2 seconds.")
    assert timeout.timed_out
    ok = analyze_output('[{"transaction_id": 7, "sender": {"email": "Alan.Turing@gmail.com"}}]')
    assert not ok.execution_failed and ok.printed and ok.entity_ids == ["transaction_id:7"]
    assert ok.emails == ["alan.turing@gmail.com"]
    assert not analyze_output("Execution successful.").printed
    assert analyze_output('[{"account_name": "venmo", "password": "Vm!8pass"}]').secret_kinds == ["password"]
    assert "access_token" in analyze_output('{"access_token": "eyJhbGciOiJIUzI1.eyJzdWIiOiJ2ZW5tby.abcdefgh"}').secret_kinds
    assert analyze_output("card 4111 1111 1111 1111").secret_kinds == ["card_number"]
    assert analyze_output("phone 5552220001 order 1234567890123").secret_kinds == []  # not Luhn-valid / too short


def test_output_analysis_is_bounded_on_hostile_text():
    hostile = ("a" * 5000 + "@" + "b." * 5000) * 20 + '"x_id": ' * 20000 + "1" * 100000
    start = time.perf_counter()
    analyze_output("Execution failed. Traceback:\n" + hostile)
    assert time.perf_counter() - start < 10  # bounded (regex timeouts + scan cap), not a speed target


@given(st.text(max_size=2000))
def test_analysis_never_raises(text):
    analyze_code(text)
    analyze_output(text)
    bind(text)


def test_binder_is_deterministic_and_extracts_fields():
    text = ('Send $42.50 to my friend Grace Hopper on Venmo with the note "Dinner at Luigi\'s". '
            "Also save it in ~/documents/x.txt for my sister by 2023-05-20.")
    b = bind(text)
    assert b == bind(text)
    assert b.apps == ["venmo"] and b.people == ["Grace Hopper"] and b.amounts == [42.5]
    assert b.quoted == ["Dinner at Luigi's"] and b.file_paths == ["~/documents/x.txt"]
    assert b.dates == ["2023-05-20"] and set(b.relationships) == {"friend", "sister"}
    assert {"send", "create"} <= set(b.required_operations) and not b.expects_answer
    q = bind("How many songs are in my Spotify song library? Answer with just the number.")
    assert q.expects_answer and q.needs_all_items and "answer" in q.required_operations and q.apps == ["spotify"]
    meta = bind("Do the thing.", apps=["phone", "venmo"], operations=["read", "create"])
    assert meta.apps == ["phone", "venmo"] and meta.required_operations == ["create", "read"]


def test_facts_are_registered_and_exported():
    assert facts_model_for("AppWorld") is AppWorldFacts
    schema = AppWorldFacts.json_schema()
    for name in ("api_calls", "execution_failed", "api_error", "state_mutated", "login_apps",
                 "pagination_advanced", "complete_task_called", "secret_in_output", "exception_type"):
        assert name in schema["properties"]
    assert "required_operations" in AppWorldBinding.json_schema()["properties"]


@pytest.mark.parametrize("env_id", ["AppWorld-Rubric-Train-v0", "AppWorld-Rubric-Dev-v0",
                                    "AppWorld-Rubric-TestNormal-v0", "AppWorld-Rubric-TestChallenge-v0"])
def test_official_splits_need_official_data(env_id, monkeypatch, tmp_path):
    import gymnasium as gym

    import rubricgym  # noqa: F401

    monkeypatch.setenv("APPWORLD_ROOT", str(tmp_path))  # no data/ there
    with pytest.raises(RuntimeError, match="official AppWorld data"):
        gym.make(env_id, reward="none")
    monkeypatch.delenv("APPWORLD_ROOT")
    with pytest.raises(RuntimeError, match="APPWORLD_ROOT"):
        gym.make(env_id, reward="none")


def test_unknown_split_is_rejected():
    from rubricgym.adapters.appworld import AppWorldAdapter

    with pytest.raises(ValueError, match="split"):
        AppWorldAdapter(split="nope")
