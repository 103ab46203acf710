"""Every offline task through ``gym.make("AppWorld-Rubric-v0")`` on a real AppWorld server:
the scripted solution reaches AppWorld's evaluate().success, the wrong one does not."""

from __future__ import annotations

import collections

import pytest
from appworld_helpers import TASKS, run_cells
from gymnasium.utils.env_checker import check_env

from rubricgym.adapters.appworld.facts import AppWorldFacts

pytestmark = pytest.mark.slow


def test_task_set_covers_enough_apps():
    assert len(TASKS) >= 20
    apps = collections.Counter(app for t in TASKS for app in t["apps"])
    assert len(apps) >= 4, apps
    assert len({t["id"] for t in TASKS}) == len(TASKS)
    assert all(t["id"].count("_") == 1 for t in TASKS)


@pytest.mark.parametrize("task", TASKS, ids=[t["id"] for t in TASKS])
def test_good_solution_succeeds_and_bad_fails(appworld_env, task):
    env = appworld_env
    assert task["id"] in env.unwrapped.adapter.task_ids()
    for kind, expected in (("good", True), ("bad", False)):
        obs, info, (last_obs, reward, terminated, truncated, step_info) = run_cells(
            env, task["id"], task[kind], fenced=(kind == "bad"))
        assert task["instruction"] in obs and info["instruction"] == task["instruction"]
        trajectory = env.unwrapped.trajectory
        assert terminated and not truncated, (kind, last_obs)
        outcome = step_info["outcome"]
        assert outcome.success is expected, (kind, outcome.detail)
        assert trajectory.transitions[-1].env_reward == (1.0 if expected else 0.0)
        assert 0 < outcome.detail["num_tests"] and outcome.detail["pass_fraction"] == (
            outcome.detail["pass_count"] / outcome.detail["num_tests"])
        assert (outcome.detail["pass_fraction"] == 1.0) is expected
        facts = [t.facts for t in trajectory.transitions]
        assert all(isinstance(f, AppWorldFacts) for f in facts)
        if kind == "good":
            assert not any(f.execution_failed for f in facts), [t.observation for t in trajectory.transitions]
        last = facts[-1]
        assert last.complete_task_called and last.task_completed and last.episode_done
        assert set(task["apps"]) <= set(last.authenticated_apps)
        trca = step_info["trca"]  # the shipped operator library scored every step
        assert trca["judgments"]["task_marked_complete"] == 1
        if kind == "good":
            covered = {op for op, hit in trca["coverage"].items() if hit}
            assert {"credentials_obtained", "task_app_authenticated"} <= covered, covered
            assert ("task_app_data_read" in covered) == ("read" in task["operations"]), covered
            needed = "answer_submitted" if "answer" in task["operations"] else "required_write_done"
            assert needed in covered, (needed, covered)


def test_facts_of_a_paginated_question(appworld_env):
    task = next(t for t in TASKS if t["id"] == "venmoask_1")
    run_cells(appworld_env, task["id"], task["good"])
    login, walk, done = appworld_env.unwrapped.trajectory.transitions
    assert login.facts.login_apps == ["venmo"] and login.facts.passwords_fetched and login.facts.accepted
    assert login.context_key.endswith("stage=start")
    assert walk.context_key == "apps=venmo|auth=venmo|stage=authenticated"
    assert walk.facts.pagination_advanced and walk.facts.paginated_apis == ["venmo.show_transactions"]
    assert walk.facts.printed_output and not walk.facts.state_mutated
    assert done.facts.answer_given and done.facts.task_completed and done.terminated
    assert done.info["trca"]["judgments"]["answer_submitted"] == 1
    assert appworld_env.unwrapped.trajectory.binding["expects_answer"] is True


def test_facts_of_writes_errors_and_secrets(appworld_env):
    env = appworld_env
    env.reset(options={"task_id": "venmopay_1"})
    _, _, _, _, info = env.step("<action>print(apis.supervisor.show_account_passwords())</action>")
    assert info["transition"].facts.secret_in_output and "password" in info["transition"].facts.secret_kinds
    _, _, _, _, info = env.step("<action>apis.venmo.show_transactions(access_token='nope')</action>")
    f = info["transition"].facts
    assert f.execution_failed and f.api_error and f.api_error_codes and not f.accepted and f.rejected
    _, _, _, _, info = env.step("<action>{}['missing']</action>")
    assert info["transition"].facts.exception_type == "KeyError" and not info["transition"].facts.api_error
    _, _, _, _, info = env.step("no code here")
    assert not info["transition"].facts.parsed and info["transition"].facts.parse_error == "missing_tag"
    cell = ("t = apis.venmo.login(username='ada.lovelace@gmail.com', password='Vm!8pass')['access_token']\n"
            "print(apis.venmo.create_transaction(access_token=t, receiver_email='grace.hopper@gmail.com', amount=1))")
    _, _, terminated, _, info = env.step(f"<action>{cell}</action>")
    f = info["transition"].facts
    assert f.state_mutated and f.mutating_apis == ["venmo.create_transaction"] and f.state_changed
    assert f.login_apps == ["venmo"] and not terminated
    assert any(e.startswith("transaction_id:") for e in f.new_entities)


def test_check_env(appworld_env):
    check_env(appworld_env.unwrapped, skip_render_check=False)
