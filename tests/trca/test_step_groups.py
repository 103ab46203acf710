"""TRCA's step groups (docs/design.md §4, T9): which steps share a context key, on the real
engines, and the report ``rubricgym library test`` gives about them."""

from __future__ import annotations

import gymnasium as gym
import pytest
from requirements_guard import need

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.contract import Trajectory
from rubricgym.registration import get_spec
from rubricgym.trca.step_groups import format_step_groups, step_groups

# (env id, the extra an engine needs); the idle response is malformed: it changes nothing
ENVS = [("ALFWorld-Rubric-v0", "alfworld"), ("WebShop-Rubric-v0", None), ("SearchQA-Rubric-v0", None),
        ("AppWorld-Rubric-v0", None)]
IDLE = "Let me think about this first."


def play(env, task_id: str, responses: list[str]) -> Trajectory:
    env.reset(seed=0, options={"task_id": task_id})
    for response in responses:
        _, _, terminated, truncated, _ = env.step(response)
        if terminated or truncated:
            break
    return env.unwrapped.trajectory.model_copy(deep=True)


@pytest.mark.parametrize("env_id,extra", ENVS, ids=[e[0] for e in ENVS])
def test_same_observable_state_shares_a_key_and_a_task_relevant_difference_does_not(env_id, extra):
    """Rollout A plays the expert plan; rollout B first sends a response that changes nothing,
    then the same plan: B's states are A's, one step later, so its keys are A's (the idle step
    shares A's first key). The expert's first action changes the task state: its key differs."""
    if extra:
        need(extra, f"pip install 'rubricgym[{extra}]'")
    env = gym.make(env_id, reward="none")
    try:
        adapter = env.unwrapped.adapter
        task_id = adapter.task_ids()[0]
        env.reset(seed=0, options={"task_id": task_id})
        grammar = adapter.grammar
        plan = [grammar.render(a) for a in get_spec(env_id).load_expert()(adapter)]
        a = play(env, task_id, plan)
        b = play(env, task_id, [IDLE, *plan])
    finally:
        env.close()
    keys_a = [t.context_key for t in a.transitions]
    keys_b = [t.context_key for t in b.transitions]
    assert not b.transitions[0].facts.accepted  # the idle step was played, and refused
    assert keys_b[0] == keys_a[0] and keys_b[1:] == keys_a, (keys_a, keys_b)  # same states, same keys
    assert len(set(keys_a)) > 1 and keys_a[1] != keys_a[0]  # the task moved on: a new group

    report = step_groups([a, b])
    assert report.task_groups == 1 and report.steps == len(keys_a) + len(keys_b)
    assert report.steps_in_shared_groups >= len(keys_a) + 1  # every step of A, and B's idle step, is shared
    assert report.largest and report.largest[0].rollouts == 2
    assert "share their context key" in format_step_groups(report)


def test_rollouts_of_other_tasks_or_seeds_never_share_a_group():
    def trajectory(task_id: str, seed: int, keys: list[str]) -> Trajectory:
        return Trajectory.model_validate({"benchmark": "base", "task_id": task_id, "seed": seed, "transitions": [
            {"step": k, "response": "", "action": {"ok": True, "action": "x"}, "observation": "", "facts": {},
             "context_key": key} for k, key in enumerate(keys)]})

    report = step_groups([trajectory("t", 0, ["a", "b"]), trajectory("t", 1, ["a", "b"]), trajectory("u", 0, ["a"]),
                          trajectory("t", 0, ["a", ""])])
    # only ("t", seed 0) has two rollouts; an empty key is in no group
    assert (report.task_groups, report.steps, report.steps_in_shared_groups) == (3, 7, 2)
    assert report.largest[0].context_key == "a" and report.largest[0].rollouts == 2
    assert "no step shares" in format_step_groups(step_groups([trajectory("t", 0, ["a", "b"])]))


def test_tau_bench_keys_follow_the_previous_action_and_the_writes():
    """tau-bench's key is the domain, the previous action and the writes so far (capped at 3):
    rollout B takes a read-only detour before the gold calls, so its first key is A's (nothing
    done yet), its second is the detour's own, and from then on its keys are A's one step later
    (the same previous action, the same writes). A successful write moves every later key."""
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    env_id = "TauBench-Retail-Rubric-v0"
    env = gym.make(env_id, reward="none")
    try:
        adapter = env.unwrapped.adapter
        task_id = adapter.task_ids()[0]
        env.reset(seed=0, options={"task_id": task_id})
        plan = [adapter.grammar.render(a) for a in get_spec(env_id).load_expert()(adapter)]
        a = play(env, task_id, plan)
        detour = adapter.grammar.render('{"name": "list_all_product_types", "arguments": {}}')
        b = play(env, task_id, [detour, *plan])
    finally:
        env.close()
    keys_a = [t.context_key for t in a.transitions]
    keys_b = [t.context_key for t in b.transitions]
    assert keys_b[0] == keys_a[0] and "after:list_all_product_types" in keys_b[1] and keys_b[1] not in keys_a
    assert keys_b[2:] == keys_a[1:len(keys_b) - 1], (keys_a, keys_b)
    writes = [int(k.rsplit("writes:", 1)[1]) for k in keys_a]
    assert writes == sorted(writes) and writes[-1] > writes[0]  # the gold plan writes: the key moved on
    report = step_groups([a, b])
    assert report.task_groups == 1 and report.steps_in_shared_groups >= 2 * (len(keys_b) - 2)
