"""The gold end state's hashes are computed once per task (``adapters/tau_bench/gold.py``), and
what tau2's evaluator gets from the cached gold environment equals what the real one gives."""

from __future__ import annotations

import pytest
from requirements_guard import need

pytestmark = pytest.mark.usefixtures("tau2_installed")


@pytest.fixture(scope="module")
def tau2_installed():
    need("tau2", "pip install 'rubricgym[tau_bench]'")


def _retail():
    from rubricgym.adapters.tau_bench import engine as tau

    return tau.domain("retail")


def _gold_task(dom, writes: bool = True):
    """The first retail task whose gold calls change the database (or, ``writes=False``, any)."""
    for task_id in dom.order:
        task = dom.tasks[task_id]
        actions = task.evaluation_criteria.actions if task.evaluation_criteria else None
        if actions and (not writes or any(a.name.startswith(("cancel", "modify", "exchange", "return"))
                                          for a in actions)):
            return task
    raise AssertionError("no retail task with gold calls")


def _real_gold_hashes(dom, task, extra_calls=()):
    """tau2's own gold computation on a real environment, by hand."""
    env = dom.constructor(solo_mode=False)
    state = task.initial_state
    env.set_state(initialization_data=state.initialization_data if state else None,
                  initialization_actions=state.initialization_actions if state else None,
                  message_history=(state.message_history or []) if state else [])
    for action in [*task.evaluation_criteria.actions, *extra_calls]:
        try:
            env.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
        except Exception:  # noqa: BLE001 - as tau2's gold loop
            pass
    return env.get_db_hash(), env.get_user_db_hash()


def _cached_gold(dom, task, extra_calls=()):
    gold = dom.constructor()  # how tau2's evaluator builds its gold environment
    state = task.initial_state
    gold.set_state(initialization_data=state.initialization_data if state else None,
                   initialization_actions=state.initialization_actions if state else None,
                   message_history=(state.message_history or []) if state else [])
    for action in [*task.evaluation_criteria.actions, *extra_calls]:
        gold.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
    return gold


def test_the_cached_gold_hashes_equal_tau2_s_and_are_built_once_per_task():
    dom = _retail()
    cache = dom.constructor.gold_hashes
    task = _gold_task(dom)
    start = _real_gold_hashes(dom, task.model_copy(update={"evaluation_criteria": task.evaluation_criteria.model_copy(
        update={"actions": []})}))
    expected = _real_gold_hashes(dom, task)
    assert expected != start  # the gold calls change the database: the hash says which end state
    cache.clear()  # another test in this process may have evaluated the task already
    builds = cache.builds
    first = _cached_gold(dom, task)
    assert (first.get_db_hash(), first.get_user_db_hash()) == expected
    assert cache.builds == builds + 1
    again = _cached_gold(dom, task)
    assert (again.get_db_hash(), again.get_user_db_hash()) == expected
    assert cache.builds == builds + 1  # the second evaluation of the task built nothing


def test_a_failing_gold_call_and_other_questions_behave_as_on_the_real_environment():
    from tau2.data_model.tasks import Action

    dom = _retail()
    task = _gold_task(dom)
    bad = Action(action_id="bad", name="get_order_details", arguments={"order_id": "#no-such-order"})
    gold = _cached_gold(dom, task, extra_calls=[bad])  # tau2 logs such a call and goes on
    assert (gold.get_db_hash(), gold.get_user_db_hash()) == _real_gold_hashes(dom, task, extra_calls=[bad])
    # anything else the evaluator might ask is the real gold environment's answer
    assert gold.get_policy() == dom.constructor(solo_mode=False).get_policy()
    assert gold.real().get_db_hash() == gold.get_db_hash()


def test_a_gold_replay_still_scores_one_and_a_group_evaluates_its_gold_once():
    from replay import make, replay

    dom = _retail()
    cache = dom.constructor.gold_hashes
    env = make("retail")
    try:
        task_id = _gold_task(dom).id
        rewards = []
        builds = cache.builds
        for seed in range(3):  # a group of three rollouts of one task
            reward, _, _ = replay(env, task_id, seed=seed)
            rewards.append(reward)
    finally:
        env.close()
    assert rewards == [1.0, 1.0, 1.0]
    assert cache.builds - builds <= 1  # once (none when an earlier test evaluated this task)
