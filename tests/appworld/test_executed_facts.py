"""Executed-call facts against AppWorld's own request log, on purpose-written code: a call in
an untaken branch, a call in a loop run 3 times, a call through a variable, a failed write,
a paginated read. The facts must list exactly the requests AppWorld logged
(``logs/api_calls.jsonl``), in order, with secrets redacted; the static call sites
(``code_call_sites``) differ where execution does."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from rubricgym.adapters.appworld.facts import AppWorldFacts
from rubricgym.adapters.appworld.observe import REDACTED, is_secret_key

pytestmark = pytest.mark.slow
PASSWORD = "Vm!8pass"  # the supervisor's venmo password in the generated world
LOGIN = ("pw = {a['account_name']: a['password'] for a in apis.supervisor.show_account_passwords()}\n"
         "tok = apis.venmo.login(username='ada.lovelace@gmail.com', password=pw['venmo'])['access_token']")
CASES = {
    "untaken_branch": "if len(tok) < 0:\n    apis.venmo.show_transactions(access_token=tok)\nx = 1",
    "loop_3": "for i in range(3):\n    apis.venmo.search_friends(access_token=tok, query='Grace')",
    "through_variable": "f = apis.venmo.show_transactions\nf(access_token=tok, direction='received')",
    "failed_write": "apis.venmo.create_transaction(access_token=tok, receiver_email='nobody@example.com', amount=1)",
    "paginated_read": "for p in range(3):\n    apis.venmo.show_transactions(access_token=tok, page_index=p)",
    "dict_comprehension": "r = {i: apis.venmo.search_friends(access_token=tok, query='A') for i in range(2)}",
}


@pytest.fixture(scope="module")
def env():
    env = gym.make("AppWorld-Rubric-v0", reward="none")
    yield env
    env.close()


def _appworld_log(adapter, task_id: str) -> list[dict]:
    path = (adapter.data_root / "experiments" / "outputs" / adapter.experiment_name / "tasks" / task_id
            / "logs" / "api_calls.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _matches(call, entry: dict) -> None:
    assert call.method == entry["method"].upper()
    assert entry["url"].startswith(f"/{call.app}/") or entry["url"] == f"/{call.app}"
    assert set(call.arguments) == set(entry["data"])
    for key, value in entry["data"].items():
        if is_secret_key(key):
            assert call.arguments[key] == REDACTED
        elif isinstance(value, str):
            assert call.arguments[key] == repr(value)
        else:
            assert json.loads(call.arguments[key]) == value


def test_executed_facts_match_appworlds_request_log(env):
    adapter = env.unwrapped.adapter
    task_id = adapter.task_ids()[0]
    env.reset(options={"task_id": task_id})
    seen = 0
    facts: dict[str, AppWorldFacts] = {}
    for name, code in {"login": LOGIN, **CASES}.items():
        _, _, _, _, info = env.step(f"<action>{code}</action>")
        f = info["transition"].facts
        log = _appworld_log(adapter, task_id)
        new, seen = log[seen:], len(log)
        assert f.num_executed_calls == len(new) == len(f.executed_calls), name
        for call, entry in zip(f.executed_calls, new, strict=True):
            _matches(call, entry)
        assert PASSWORD not in f.model_dump_json() and "eyJ" not in f.model_dump_json(), name
        facts[name] = f

    login = facts["login"]
    assert login.login_apps == ["venmo"] and login.passwords_fetched and login.uses_access_token is False
    assert [c.kind for c in login.executed_calls] == ["read", "auth"]
    assert login.executed_calls[1].arguments["password"] == REDACTED

    branch = facts["untaken_branch"]
    assert branch.num_executed_calls == 0 and branch.call_counts == {} and not branch.read_api_called
    assert [(c.app, c.api) for c in branch.code_call_sites] == [("venmo", "show_transactions")]  # static only

    loop = facts["loop_3"]
    assert loop.call_counts == {"venmo.search_friends": 3} and loop.reads == ["venmo.search_friends"]
    assert len(loop.code_call_sites) == 1 and loop.code_has_loop

    variable = facts["through_variable"]
    assert variable.call_counts == {"venmo.show_transactions": 1} and variable.read_api_called
    assert variable.code_call_sites == []  # ast cannot see a call through a variable
    assert variable.executed_calls[0].arguments["direction"] == "'received'"

    failed = facts["failed_write"]
    assert failed.write_attempted and failed.failed_writes == ["venmo.create_transaction"]
    assert not failed.state_mutated and failed.mutating_apis == [] and failed.api_error
    assert failed.executed_calls[0].status == 409 and not failed.executed_calls[0].success
    assert 409 in failed.api_error_codes and failed.execution_failed

    pages = facts["paginated_read"]
    assert pages.call_counts == {"venmo.show_transactions": 3}
    assert [c.page_index for c in pages.executed_calls] == [0, 1, 2]
    assert pages.pagination_advanced and pages.paginated_apis == ["venmo.show_transactions"]
    assert all(c.success and c.response_bytes > 0 for c in pages.executed_calls)

    comprehension = facts["dict_comprehension"]
    assert comprehension.call_counts == {"venmo.search_friends": 2}


def test_pagination_advances_only_past_the_highest_page_read(env):
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": adapter.task_ids()[0]})
    env.step(f"<action>{LOGIN}</action>")
    read = "apis.venmo.show_transactions(access_token=tok, page_index={})"
    steps = [env.step(f"<action>{read.format(p)}</action>")[4]["transition"].facts for p in (1, 1, 0, 2)]
    assert [f.pagination_advanced for f in steps] == [True, False, False, True]


def test_a_write_that_succeeded_counts_even_when_the_code_fails_later(env):
    adapter = env.unwrapped.adapter
    env.reset(options={"task_id": adapter.task_ids()[0]})
    env.step(f"<action>{LOGIN}</action>")
    code = ("apis.venmo.create_transaction(access_token=tok, receiver_email='grace.hopper@gmail.com', amount=1)\n"
            "raise ValueError('after the write')")
    f = env.step(f"<action>{code}</action>")[4]["transition"].facts
    assert f.execution_failed and f.exception_type == "ValueError"
    assert f.state_mutated and f.mutating_apis == ["venmo.create_transaction"] and not f.failed_writes
