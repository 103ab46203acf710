"""The offline task set through ``gym.make`` on a real AppWorld server: one variant per
scenario, its good solution reaches AppWorld's evaluate().success and its wrong one does not;
across the set every Evidence and Execution operator of the shipped library fires on good
solutions and no Invalidity operator does."""

from __future__ import annotations

import collections
import json

import gymnasium as gym
import pytest
from appworld_helpers import TASKS, accepted_ids, run_cells
from gymnasium.utils.env_checker import check_env

from rubricgym.adapters.appworld.facts import AppWorldFacts
from rubricgym.adapters.appworld.paths import offline_data_root

pytestmark = pytest.mark.slow


def _one_variant_per_scenario() -> list[dict]:
    chosen: dict[str, dict] = {}
    for t in TASKS:
        if t["scenario"] not in chosen and t["id"] in accepted_ids():
            chosen[t["scenario"]] = t
    return list(chosen.values())


def test_task_set_is_training_scale_and_fully_checked():
    scenarios = {t["scenario"] for t in TASKS}
    assert len(scenarios) >= 100 and len(TASKS) == 3 * len(scenarios)
    apps = collections.Counter(app for t in TASKS for app in t["apps"])
    assert len(apps) >= 8, apps
    assert len({t["id"] for t in TASKS}) == len(TASKS) and all(t["id"].count("_") == 1 for t in TASKS)
    assert sum(len(t["apps"]) > 1 for t in TASKS) > len(TASKS) // 2  # several apps
    assert any("page_index=page" in "".join(t["good"]) for t in TASKS)  # pagination
    report = json.loads((offline_data_root() / "rubricgym_setup_report.json").read_text())
    assert report["variants"] == len(TASKS) and report["accepted"] == len(accepted_ids())
    accepted_scenarios = collections.Counter(t["scenario"] for t in TASKS if t["id"] in accepted_ids())
    assert len(accepted_scenarios) >= 100, report["refused"]
    assert sum(n == 3 for n in accepted_scenarios.values()) >= 100, accepted_scenarios
    for refusal in report["refused"]:  # refused means the evaluator disagreed with the authored intent
        assert refusal["good"] is not True or refusal["bad"] is not False
    splits = {t["split"] for t in TASKS}
    assert splits == {"train", "dev"}
    train = gym.make("AppWorld-Rubric-v0", reward="none")
    dev = gym.make("AppWorld-Rubric-v0", reward="none", split="offline_dev")
    try:
        train_ids, dev_ids = set(train.unwrapped.adapter.task_ids()), set(dev.unwrapped.adapter.task_ids())
    finally:
        train.close()
        dev.close()
    assert train_ids and dev_ids and not train_ids & dev_ids and train_ids | dev_ids == set(accepted_ids())
    train_scenarios = {t["scenario"] for t in TASKS if t["id"] in train_ids}
    assert not train_scenarios & {t["scenario"] for t in TASKS if t["id"] in dev_ids}  # held-out scenarios


@pytest.fixture(scope="module")
def all_env():
    """One env over the whole offline set, shared: each test resets it to the task it plays."""
    env = gym.make("AppWorld-Rubric-v0", split="offline_all")
    yield env
    env.close()


def test_one_variant_per_scenario_good_succeeds_wrong_fails(all_env):
    env = all_env
    fired: dict[str, set[str]] = {"evidence": set(), "execution": set(), "invalidity": set()}
    failures = []
    categories = _operator_categories()
    for task in _one_variant_per_scenario():
        for kind, expected in (("good", True), ("bad", False)):
            _, info = env.reset(options={"task_id": task["id"]})
            assert info["instruction"] == task["instruction"]
            judgments = []
            for i, cell in enumerate(task[kind]):
                response = f"```python\n{cell}\n```" if kind == "bad" else f"<think>{i}</think><action>{cell}</action>"
                last_obs, _, terminated, truncated, step_info = env.step(response)
                judgments.append(step_info["trca"]["judgments"])
                if terminated or truncated:
                    break
            # a wrong solution may stop short of complete_task: AppWorld evaluates the world as left
            outcome = step_info["outcome"] if "outcome" in step_info else env.unwrapped.adapter.outcome()
            if outcome.success is not expected:
                failures.append((task["id"], kind, outcome.detail, last_obs[-300:]))
                continue
            transitions = env.unwrapped.trajectory.transitions
            assert all(isinstance(t.facts, AppWorldFacts) for t in transitions)
            if kind == "good":
                assert terminated and transitions[-1].env_reward == 1.0
                assert not any(t.facts.execution_failed for t in transitions), task["id"]
                assert set(task["apps"]) <= set(transitions[-1].facts.authenticated_apps) | {"supervisor"}
                for step_judgments in judgments:
                    fired_now = {op for op, value in step_judgments.items() if value}
                    for op in fired_now:
                        fired[categories[op]].add(op)
    assert not failures, failures
    assert fired["invalidity"] == set(), fired["invalidity"]
    assert fired["evidence"] == {op for op, c in categories.items() if c == "evidence"}, fired
    assert fired["execution"] == {op for op, c in categories.items() if c == "execution"}, fired


def _operator_categories() -> dict[str, str]:
    import yaml

    from rubricgym.adapters.appworld.spec import SPEC

    doc = yaml.safe_load(SPEC.operator_library.read_text(encoding="utf-8"))
    return {op["id"]: op["category"] for op in doc["operators"]}


def test_facts_of_a_paginated_question(all_env):
    env = all_env
    task = next(t for t in _one_variant_per_scenario() if t["scenario"] == "answertopsender")
    run_cells(env, task["id"], task["good"])
    docs_login, find, done = env.unwrapped.trajectory.transitions
    assert docs_login.facts.login_apps == ["phone", "venmo"] and docs_login.facts.passwords_fetched
    assert docs_login.facts.api_docs_consulted and docs_login.context_key.endswith("stage=start")
    assert find.facts.pagination_advanced
    assert set(find.facts.paginated_apis) == {"phone.search_contacts", "venmo.show_transactions"}
    assert find.facts.call_counts["venmo.show_transactions"] >= 4  # 18 received payments, 5 a page
    assert find.facts.printed_output and not find.facts.state_mutated and find.facts.new_entities
    assert done.facts.answer_given and done.facts.task_completed and done.terminated
    assert done.info["trca"]["judgments"]["answer_submitted"] == 1
    assert env.unwrapped.trajectory.binding["expects_answer"] is True


def test_check_env(appworld_env):
    check_env(appworld_env.unwrapped, skip_render_check=False)
