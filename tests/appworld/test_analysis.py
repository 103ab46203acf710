"""Fast, server-free tests: grammar, code and output analysis, executed-call facts from
request-tracker entries, binder, split errors."""

from __future__ import annotations

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.adapters.appworld import binder
from rubricgym.adapters.appworld.binder import bind_task
from rubricgym.adapters.appworld.code_analysis import analyze_code
from rubricgym.adapters.appworld.facts import AppWorldBinding, AppWorldFacts
from rubricgym.adapters.appworld.grammar import CODE_GRAMMAR, code_of
from rubricgym.adapters.appworld.observe import REDACTED, EpisodeMemory, executed_call, observe_step
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


@given(st.one_of(st.text(max_size=400),
                 st.builds(lambda a, b, c: a + b + c, st.text(max_size=40),
                           st.sampled_from(["<action>", "```python\n", "```\n", "</action>", "\n```"]),
                           st.text(max_size=40))))
def test_parse_never_raises(text):
    parsed = parse_response(text, CODE_GRAMMAR)
    assert parsed.ok == (parsed.error is None)  # a classified failure, or an action...
    if parsed.ok:  # ...that is exactly the text inside its span
        start, end = parsed.action_span
        assert parsed.action == text[start:end] and parsed.action.strip() == parsed.action


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
    result = analyze_output("Execution failed. Traceback:\n" + hostile)  # regex time-outs + scan cap
    assert result.execution_failed and result.exception_type == "ExecutionError"


@given(st.text(max_size=2000))
def test_analysis_never_raises(text):
    import ast

    code = analyze_code(text)
    try:
        ast.parse(text)
        parses = True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        parses = False
    assert code.syntax_ok == parses  # the analysis agrees with Python itself
    out = analyze_output(text)
    assert out.execution_failed == text.strip().startswith("Execution failed")
    assert not out.timed_out or out.execution_failed
    assert isinstance(bind_task(text), AppWorldBinding)
    stripped = code_of(text)
    assert stripped == text or stripped in text  # only a fence is ever removed


def test_binder_is_deterministic_and_extracts_fields():
    text = ('Send $42.50 to my friend Grace Hopper on Venmo with the note "Dinner at Luigi\'s". '
            "Also save it in ~/documents/x.txt for my sister by 2023-05-20.")
    b = bind_task(text)
    assert b == bind_task(text)
    assert b.apps == ["venmo"] and b.people == ["Grace Hopper"] and b.amounts == [42.5]
    assert b.quoted == ["Dinner at Luigi's"] and b.file_paths == ["~/documents/x.txt"]
    assert b.dates == ["2023-05-20"] and set(b.relationships) == {"friend", "sister"}
    assert {"send", "create"} <= set(b.required_operations) and not b.expects_answer
    q = bind_task("How many songs are in my Spotify song library? Answer with just the number.")
    assert q.expects_answer and q.needs_all_items and "answer" in q.required_operations and q.apps == ["spotify"]
    meta = bind_task("Do the thing.", apps=["phone", "venmo"], operations=["read", "create"])
    assert meta.apps == ["phone", "venmo"] and meta.required_operations == ["create", "read"]


def test_facts_are_registered_and_exported():
    assert facts_model_for("AppWorld") is AppWorldFacts
    schema = AppWorldFacts.json_schema()
    for name in ("executed_calls", "call_counts", "failed_writes", "code_call_sites", "execution_failed", "api_error", "state_mutated", "login_apps",
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


# ---------------------------------------------------------------- executed-call facts
def _entry(app, api, method, data, status=200, size=10):
    return {"method": method, "url": f"/{app}/x", "data": data, "app": app, "api": api, "status": status,
            "response_bytes": size}


def test_executed_calls_are_classified_and_secrets_redacted():
    login = executed_call(_entry("venmo", "login", "post", {"username": "a@b.c", "password": "Vm!8pass"}))
    assert login.kind == "auth" and login.success and login.arguments == {"username": "'a@b.c'", "password": REDACTED}
    read = executed_call(_entry("venmo", "show_transactions", "get", {"access_token": "eyJabc", "page_index": 2}))
    assert read.kind == "read" and read.page_index == 2 and read.arguments["access_token"] == REDACTED
    write = executed_call(_entry("venmo", "create_transaction", "post", {"amount": 4.5}, status=409))
    assert write.kind == "write" and not write.success and write.arguments == {"amount": "4.5"}
    answer = executed_call(_entry("supervisor", "complete_task", "post", {"answer": None}))
    assert answer.kind == "answer"
    raw = executed_call({"method": "get", "url": "/spotify/library/songs", "data": {"verification_code": "123"}})
    assert (raw.app, raw.api, raw.status, raw.success) == ("spotify", "/library/songs", None, False)
    assert raw.arguments == {"verification_code": REDACTED}
    shipping = executed_call(_entry("amazon", "place_order", "post", {"shipping_address_id": 3, "zip_code": "1"}))
    assert shipping.arguments == {"shipping_address_id": "3", "zip_code": "'1'"}  # not secrets


def test_observe_step_reads_the_request_log_not_the_code():
    code = "if False:\n    apis.venmo.show_transactions(access_token=t)\nf = apis.venmo.show_profile\nf()"
    requests = [_entry("supervisor", "show_account_passwords", "get", {}),
                _entry("venmo", "login", "post", {"username": "u", "password": "p"}),
                _entry("venmo", "show_profile", "get", {"access_token": "t"}),
                _entry("venmo", "show_transactions", "get", {"access_token": "t", "page_index": 1}),
                _entry("venmo", "show_transactions", "get", {"access_token": "t", "page_index": 1}),
                _entry("venmo", "create_transaction", "post", {"access_token": "t", "amount": 1}, status=422),
                _entry("venmo", "like_transaction", "post", {"access_token": "t", "transaction_id": 1}),
                _entry("supervisor", "complete_task", "post", {"answer": 42})]
    seen = observe_step(code, "Execution successful.", requests, EpisodeMemory())
    f = AppWorldFacts(**seen.facts)
    assert f.num_executed_calls == 8 and f.call_counts["venmo.show_transactions"] == 2
    assert f.apps_called == ["venmo"] and f.login_apps == ["venmo"] and f.authenticated_apps == ["venmo"]
    assert f.passwords_fetched and f.uses_access_token and f.read_api_called
    assert f.reads == ["venmo.show_profile", "venmo.show_transactions"]
    assert f.mutating_apis == ["venmo.like_transaction"] and f.failed_writes == ["venmo.create_transaction"]
    assert f.state_mutated and f.write_attempted and f.api_error and f.api_error_codes == [422]
    assert f.pagination_advanced and f.paginated_apis == ["venmo.show_transactions"]
    assert f.complete_task_called and f.answer_given and seen.complete_task_served
    assert [(c.app, c.api) for c in f.code_call_sites] == [("venmo", "show_transactions")]  # static: not run
    assert "p" not in [v for c in f.executed_calls for v in c.arguments.values()]
    again = observe_step("", "Execution successful.", requests[3:4], seen.memory)
    assert not again.facts["pagination_advanced"] and again.facts["authenticated_apps"] == ["venmo"]
    later = observe_step("", "Execution successful.",
                         [_entry("venmo", "show_transactions", "get", {"page_index": 2})], seen.memory)
    assert later.facts["pagination_advanced"]


def test_a_failed_login_or_empty_answer_counts_for_nothing():
    requests = [_entry("venmo", "login", "post", {"password": "x"}, status=401),
                _entry("supervisor", "complete_task", "post", {"answer": None}),
                _entry("supervisor", "complete_task", "post", {})]
    f = observe_step("", "Execution failed. Traceback:\nException: Response status code is 401:", requests,
                     EpisodeMemory()).facts
    assert f["login_apps"] == [] and f["authenticated_apps"] == [] and f["api_error_codes"] == [401]
    assert f["complete_task_called"] and not f["answer_given"]


# The pattern the fence stripper replaced (quadratic on long text); a reference on short text.
_OLD_FENCE = regex.compile(r"^\s*```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)\n?[ \t]*```\s*$", regex.DOTALL | regex.IGNORECASE)


@given(st.lists(st.sampled_from(["`", "```", "\n", " ", "\t", "py", "x", "python", "PYTHON3", "js"]), max_size=25)
       .map("".join))
def test_fence_stripping_matches_the_old_pattern(text):
    m = _OLD_FENCE.match(text)
    assert code_of(text) == (m.group(1) if m else text)


def test_fence_stripping_is_correct_on_hostile_text():
    hostile = "```\n" + "``` " * 8000 + "x"
    assert code_of(hostile) == hostile
    blank = "```\n" + " " * 32000  # the old pattern backtracked quadratically here (10 s at 32 KB)
    assert code_of(blank) == blank
    body = "x = '```'\n" * 3000
    assert code_of("```python\n" + body + "```") == body.rstrip("\n")
    assert code_of("```javascript\nx\n```") == "```javascript\nx\n```"


def test_binder_survives_a_regex_time_out(monkeypatch):
    monkeypatch.setattr(binder, "_NAME", regex.compile(r"(a+)+$"))  # catastrophic on "aaa...b"
    monkeypatch.setattr(binder, "_T", 0.01)
    b = bind_task("a" * 4000 + "b Grace Hopper")
    assert b.people == [] and isinstance(b, AppWorldBinding)


def test_shipped_library_reads_only_executed_facts():
    import yaml

    from rubricgym.adapters.appworld.spec import SPEC

    doc = yaml.safe_load(SPEC.operator_library.read_text(encoding="utf-8"))
    static = {name for name in AppWorldFacts.model_fields if name.startswith("code_")}
    assert static == {"code_call_sites", "code_has_loop", "code_imports", "code_lines"}
    for op in doc["operators"]:
        assert not static & set(op["reads"]), op["id"]
        assert "facts.code_" not in op["condition"], op["id"]
