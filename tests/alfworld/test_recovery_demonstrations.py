"""Recovery demonstrations (``warmup.recoveries``): one off-plan step, then the planner's replan
from the state it left, on the real engine."""

from __future__ import annotations

import random

import gymnasium as gym
import pytest

from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
from rubricgym.adapters.alfworld.expert import expert_actions
from rubricgym.models import load_causal_lm
from rubricgym.prompts import PromptSettings
from rubricgym.registration import expert_replans
from rubricgym.trainers.warmup import collect_demonstrations

GAMES = 3


def test_after_a_detour_holding_the_object_the_replan_wins(make_env, wrap):
    env = make_env()
    adapter = env.unwrapped.adapter
    assert expert_replans(env)
    rng = random.Random(0)
    checked = 0
    for task_id in adapter.task_ids()[: 2 * GAMES]:
        env.reset(seed=0, options={"task_id": task_id})
        plan = expert_actions(adapter)
        detour_at = next(i for i, c in enumerate(plan) if c.startswith("take")) + 1  # holding the object
        if detour_at == len(plan) or checked == GAMES:
            continue  # the take wins the game (look at an object under a lamp already lit)
        checked += 1
        for command in plan[:detour_at]:
            env.step(wrap(command))
        _, _, _, _, info = env.step(wrap("inventory"))  # off the plan, changes nothing
        others = [a for a in info["admissible_actions"] if a.startswith("go to") and a != plan[detour_at]]
        env.step(wrap(rng.choice(others)))  # off the plan: somewhere else
        replanned = expert_actions(adapter)
        # planned from where the agent stands, holding the object: a stale plan would take it again
        assert replanned and plan[detour_at - 1] not in replanned, (task_id, plan, replanned)
        terminated = False
        for command in replanned:
            _, _, terminated, _, info = env.step(wrap(command))
        assert terminated and info["outcome"].success, (task_id, plan, replanned)
    assert checked == GAMES


def test_recovery_demonstrations_follow_a_detour(make_env):
    _, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)

    def env_fn():
        return gym.make("ALFWorld-Rubric-v0", reward="none", data_path=BUNDLED_ROOT, max_steps=12)

    tasks = make_env().unwrapped.adapter.task_ids()[:GAMES]
    prompt = PromptSettings(max_prompt_tokens=4096)
    plain = collect_demonstrations(env_fn, tokenizer, prompt, tasks, seed=0)
    both = collect_demonstrations(env_fn, tokenizer, prompt, tasks, seed=0, recoveries=2)
    assert all(d.source == "plan" for d in plain)
    assert [d.prompt_ids for d in both if d.source == "plan"] == [d.prompt_ids for d in plain]  # plain replay unchanged
    recovered = [d for d in both if d.source == "recovery"]
    assert {d.task_id for d in recovered} == set(tasks)
    assert all(d.step >= 1 for d in recovered)  # the detour itself is never a demonstration
    # a recovery starts from a state off the plan: its first prompt is none of the plain replay's
    plain_prompts = {tuple(d.prompt_ids) for d in plain}
    for task_id in tasks:
        assert any(tuple(d.prompt_ids) not in plain_prompts for d in recovered if d.task_id == task_id), task_id


def test_recoveries_need_an_expert_that_replans():
    from trainer.word_env import make_expert_word_env

    _, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)
    with pytest.raises(ValueError, match=r"warmup.recoveries=1 needs an expert that plans from a mid-episode state"):
        collect_demonstrations(lambda: make_expert_word_env(max_steps=2, num_tasks=2), tokenizer,
                               PromptSettings(max_prompt_tokens=40), ["pick-0"], seed=0, recoveries=1)
