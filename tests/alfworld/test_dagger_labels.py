"""DAgger's labels (``warmup.dagger_rounds``): the planner's next command at every state a policy
reached, its malformed and off-plan steps included, on the real engine."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
from rubricgym.adapters.alfworld.expert import expert_actions
from rubricgym.models import load_causal_lm
from rubricgym.prompts import PromptSettings
from rubricgym.trainers.config import load_config
from rubricgym.trainers.trainer import WARMUP_FILE, Trainer
from rubricgym.trainers.warmup import label_visited_states


def _env_fn():
    return gym.make("ALFWorld-Rubric-v0", reward="none", data_path=BUNDLED_ROOT, max_steps=12)


def _first_game_and_plan(env):
    """The first bundled game, reset, and the planner's whole plan for it."""
    adapter = env.unwrapped.adapter
    task_id = adapter.task_ids()[0]
    env.reset(seed=0, options={"task_id": task_id})
    return task_id, expert_actions(adapter)


def test_every_state_the_policy_reached_gets_the_replanned_command(make_env, wrap):
    _, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)
    env = make_env()
    task_id, plan = _first_game_and_plan(env)
    first_step = env.step(wrap(plan[0]))[4]
    detour = next(a for a in first_step["admissible_actions"] if a.startswith("go to") and a != plan[1])
    env.step(wrap(detour))
    replanned = expert_actions(env.unwrapped.adapter)  # from where the detour left the agent
    # the policy's episode: the plan's first step, a detour, a malformed response, then stop
    responses = [wrap(plan[0]), wrap(detour), "no tags at all"]
    demos = label_visited_states(_env_fn, tokenizer, PromptSettings(max_prompt_tokens=4096), [(task_id, 0, responses)])
    assert [d.step for d in demos] == [0, 1, 2]  # one label per state reached, before each response
    assert all(d.source == "visited" for d in demos)
    labels = [d.response_text.split("<action>")[1].split("</action>")[0] for d in demos]
    assert labels[0] == plan[0] and labels[1] == plan[1]  # on the plan: the plan's next step
    assert labels[2] == replanned[0]  # after the detour: the replan's, not the stale plan's
    assert replanned != plan[2:]  # the detour did change the plan


def test_no_state_after_the_episode_ended_is_labelled():
    _, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)
    env = _env_fn()
    task_id, plan = _first_game_and_plan(env)
    env.close()
    # the whole plan, then more responses: the episode ends at the win, so nothing after it is labelled
    responses = [f"<think>x</think><action>{c}</action>" for c in plan] + ["<action>look</action>"] * 3
    demos = label_visited_states(_env_fn, tokenizer, PromptSettings(max_prompt_tokens=4096), [(task_id, 0, responses)])
    assert len(demos) == len(plan)


def test_dagger_needs_an_expert_that_replans():
    from trainer.word_env import make_expert_word_env

    _, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)
    with pytest.raises(ValueError, match=r"warmup.dagger_rounds needs an expert that plans from a mid-episode"):
        label_visited_states(lambda: make_expert_word_env(max_steps=2, num_tasks=2), tokenizer,
                             PromptSettings(max_prompt_tokens=40), [("pick-0", 0, ["<action>x</action>"])])


def test_a_warm_start_with_dagger_rounds_records_them(tmp_path):
    config = load_config(None, [
        "model.name=tiny", "model.device=cpu", "env.id=ALFWorld-Rubric-v0", "env.max_steps=3",
        "algorithm.advantage=grpo", "algorithm.group_size=2", "algorithm.tasks_per_iteration=1",
        "generation.max_new_tokens=8", "prompt.max_prompt_tokens=4096", "run.progress=false",
        "warmup.enabled=true", "warmup.evaluate=false", "warmup.games=2", "warmup.steps=2", "warmup.dagger_rounds=2",
        f"run.output_dir={tmp_path}", "run.name=dagger",
    ])
    trainer = Trainer(config)
    try:
        record = trainer.warm_start()
        warmup_lines = trainer.read_metrics("warmup")
    finally:
        trainer.close()
    assert [r["round"] for r in record["dagger"]] == [1, 2]
    # the tiny model's responses are never actions, so every state of its 3-step episodes is labelled
    assert all(r["episodes"] == 2 and r["labels"] == 6 for r in record["dagger"]), record["dagger"]
    assert record["dagger_demonstrations"] == 12
    assert record["steps"] == 3 * 2  # the cloning, then warmup.steps more per round
    assert [m["dagger_round"] for m in warmup_lines if "dagger_round" in m] == [1, 2]
    assert json.loads((tmp_path / "dagger" / WARMUP_FILE).read_text())["dagger"] == record["dagger"]
