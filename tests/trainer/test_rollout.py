"""Multi-turn rollouts: identical initial states per group, lockstep batching, exact
per-step token records, both prompt styles."""

from __future__ import annotations

import pytest
import torch
from trainer.word_env import WORDS, make_word_env

from rubricgym.models import build_tiny_model
from rubricgym.prompts import EpisodeView, PastStep, PromptSettings, chat_messages, render_prompt, window_messages
from rubricgym.trainers.config import GenerationSettings
from rubricgym.trainers.generation import HFGenerator
from rubricgym.trainers.rollout import RolloutCollector, RolloutTimings


class ScriptedPolicy:
    """Answers from a fixed list, in order, tokenized like a model's output (real tokenizer)."""

    def __init__(self, tok, texts):
        self.tok, self.texts, self.calls = tok, list(texts), []

    def generate(self, prompts):
        self.calls.append(len(prompts))
        out = []
        for _ in prompts:
            text = self.texts.pop(0)
            out.append(self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id])
        return out

    def sync_weights(self, model, iteration):
        pass


def test_groups_share_initial_state_and_run_in_lockstep():
    _, tok = build_tiny_model(0)
    collector = RolloutCollector(lambda: make_word_env(max_steps=3), tok, PromptSettings(), max_steps=3)
    answers = [
        # turn 1: 2 tasks x G=2
        "<think>a</think><action>apple</action>", "<action>bread</action>",
        "nonsense", "<action>drum</action>",
        # turn 2: the three still running
        "<action>apple</action>", "<action>apple</action>", "<action>chair</action>",
        # turn 3: one left
        "<think>x</think><action>flute</action>",
    ]
    policy = ScriptedPolicy(tok, answers)
    groups = collector.collect(policy, [("pick-0", 11), ("pick-1", 12)], group_size=2, timings=RolloutTimings())
    assert policy.calls == [4, 3, 1]  # one batched generate call per turn, only active rollouts
    assert [[r.member for r in g] for g in groups] == [[0, 1], [0, 1]]
    for g in groups:
        assert len({r.trajectory.initial_observation for r in g}) == 1
        assert {r.seed for r in g} == {g[0].seed} and {r.task_id for r in g} == {g[0].task_id}
    first = groups[0][0]
    assert first.success and len(first.steps) == 1
    step = first.steps[0]
    assert tok.decode(step.response_ids[step.action_tokens[0] : step.action_tokens[1]]) == "apple"
    assert tok.decode(step.response_ids[step.reasoning_tokens[0] : step.reasoning_tokens[1]]) == "a"
    assert step.response_ids[-1] == tok.eos_token_id and step.response_text.endswith("</action>")
    bad = groups[1][0].steps[0]
    assert bad.action_tokens is None and bad.reasoning_tokens is None
    assert [len(r.steps) for r in groups[1]] == [2, 3]
    assert groups[1][0].success and not groups[1][1].success
    assert groups[1][1].steps[1].response_text == "<action>chair</action>"
    # the prompt of a later step shows the history window and the new observation
    later = tok.decode(groups[0][1].steps[1].prompt_ids)
    assert "Action: bread" in later and "Wrong." in later and "step 2" in later


def test_window_prompt_keeps_only_the_last_k_steps():
    view = EpisodeView("B", "do it", "start", "obs5", ["a", "b"],
                       [PastStep(f"r{k}", f"act{k}", f"obs{k + 1}") for k in range(5)])
    text = window_messages(view, PromptSettings(history=2))[0]["content"]
    assert "act3" in text and "act4" in text and "act2" not in text
    assert "already taken 5 step(s)" in text and "'a', 'b'" in text and "<action>" in text
    assert "<action>a</action>" not in text  # the paper's template by default
    example = window_messages(view, PromptSettings(format_example=True))[0]["content"]
    assert example.endswith("<think>short reasoning</think><action>a</action>")


def test_restated_task_sits_between_the_actions_and_the_instruction_in_both_styles():
    view = EpisodeView("B", "put a mug in the sink.", "start", "obs1", ["take mug 1", "look"],
                       [PastStep("r0", "look", "obs1")])
    plain = window_messages(view, PromptSettings())[0]["content"]
    assert plain.count("put a mug in the sink.") == 1 and "Remember" not in plain
    window = window_messages(view, PromptSettings(restate_task=True))[0]["content"]
    reminder = "Remember, your task is to: put a mug in the sink."
    assert window.count("put a mug in the sink.") == 2
    assert window.index("'take mug 1'") < window.index(reminder) < window.index("<action>")
    assert window.replace(reminder + "\n\n", "") == plain  # nothing else changes
    last = chat_messages(view, PromptSettings(restate_task=True))[-1]["content"]
    assert last.startswith("obs1") and last.index("'look'") < last.index(reminder)
    assert chat_messages(view, PromptSettings())[-1]["content"].count("Remember") == 0


def test_chat_prompt_accumulates_and_drops_oldest_turns_when_too_long():
    _, tok = build_tiny_model(0)
    view = EpisodeView("B", "do it", "start", "obs3", None,
                       [PastStep(f"<action>act{k}</action>", f"act{k}", f"obs{k + 1}") for k in range(3)])
    ids = render_prompt(tok, view, PromptSettings(style="chat", max_prompt_tokens=4000))
    text = tok.decode(ids)
    assert text.count("<|im_start|>assistant") == 4  # 3 past responses + the generation prompt
    assert text.index("start") < text.index("act0") < text.index("obs1") < text.index("act2")
    short = tok.decode(render_prompt(tok, view, PromptSettings(style="chat", max_prompt_tokens=len(ids) - 10)))
    assert "act0" not in short and "act2" in short and "do it" in short


def test_sampled_generation_is_batched_left_padded_and_cut_at_eos():
    model, tok = build_tiny_model(1)
    gen = HFGenerator(model, tok, GenerationSettings(max_new_tokens=12))
    prompts = [[10, 11], [20, 21, 22, 23, 24, 25]]
    torch.manual_seed(0)
    a = gen.generate(prompts)
    torch.manual_seed(0)
    b = gen.generate(prompts)
    assert a == b and len(a) == 2
    for r in a:
        assert 1 <= len(r) <= 12
        assert tok.pad_token_id not in r[:-1]
        if tok.eos_token_id in r:
            assert r.index(tok.eos_token_id) == len(r) - 1


def test_words_env_is_deterministic():
    env = make_word_env()
    o1, _ = env.reset(seed=1, options={"task_id": "pick-0"})
    o2, _ = env.reset(seed=2, options={"task_id": "pick-0"})
    assert o1 == o2 and all(w in o1 for w in WORDS)


def test_step_samples_keep_every_reward_component():
    """Two reward components on one env: the trainer's step samples keep both records."""
    from rubricgym.rewards import ComponentScore, RubricReward

    class StepCount:
        name, keep_env_reward = "steps", False

        def reset(self, info):
            self.n = 0

        def score(self, transition, info):
            self.n += 1
            return ComponentScore(-0.01, {"n": self.n})

    class Fixed:
        name, keep_env_reward = "fixed", True

        def reset(self, info):
            return None

        def score(self, transition, info):
            return ComponentScore(0.5, {"why": "constant"})

    _, tok = build_tiny_model(0)
    collector = RolloutCollector(lambda: RubricReward(make_word_env(max_steps=2), [(StepCount(), 1.0), (Fixed(), 2.0)]),
                                 tok, PromptSettings(), max_steps=2)
    policy = ScriptedPolicy(tok, ["<action>bread</action>", "<action>apple</action>"])
    [[rollout]] = collector.collect(policy, [("pick-0", 1)], group_size=1, timings=RolloutTimings())
    collector.close()
    first, second = rollout.steps
    assert first.info["rubric"]["steps"] == {"reward": -0.01, "weight": 1.0, "n": 1}
    assert first.info["rubric"]["fixed"] == {"reward": 0.5, "weight": 2.0, "why": "constant"}
    assert second.info["rubric"]["steps"]["n"] == 2
    assert second.reward == pytest.approx(-0.01 + 2 * 0.5 + 1.0)  # the win's engine reward kept once
    assert rollout.trajectory.transitions[1].info["rubric"] == second.info["rubric"]


def test_format_instruction_follows_the_env_grammar():
    """The default grammar gives the paper's text word for word; other grammars ask for their tags."""
    from rubricgym.parsing import TagGrammar
    from rubricgym.prompts import FORMAT_INSTRUCTION, format_instruction

    assert FORMAT_INSTRUCTION == (
        "Now it's your turn to take an action. You should first reason step-by-step about the current "
        "situation. This reasoning process MUST be enclosed within <think> </think> tags. Once you've "
        "finished your reasoning, you should choose an admissible action for current step and present it "
        "within <action> </action> tags.")
    search = format_instruction(TagGrammar(action_tags=("search", "answer"), on_multiple="first"))
    assert "<search> </search> or <answer> </answer> tags" in search and "<action>" not in search
    view = EpisodeView("B", "do it", "start", "obs", ["q"], grammar=TagGrammar(action_tags=("search", "answer")))
    text = window_messages(view, PromptSettings(format_example=True))[0]["content"]
    assert "<think>short reasoning</think><search>q</search>" in text
