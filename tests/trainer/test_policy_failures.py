"""Issue 28, item 3: a rollout that ends because its action broke the engine (a policy
failure) is trained on, and never gets a higher advantage than the same rollout ending
normally, with the same other rollouts in its group (GRPO and TRCA)."""

from __future__ import annotations

import pytest
from trainer.word_env import make_fragile_trca_word_env

from rubricgym.models import build_tiny_model
from rubricgym.prompts import PromptSettings
from rubricgym.estimators import resolve_estimator
from rubricgym.trainers.advantages import assign_advantages
from rubricgym.trainers.rollout import RolloutCollector, RolloutTimings


class ScriptedTurns:
    """At turn t, the i-th active rollout answers ``turns[t][i]`` (as ``<action>word</action>``)."""

    def __init__(self, tok, turns: list[list[str]]):
        self.tok, self.turns, self.turn = tok, turns, 0

    def generate(self, prompts):
        words = self.turns[self.turn]
        assert len(words) == len(prompts), (self.turn, len(prompts))
        self.turn += 1
        return [self.tok(f"<action>{w}</action>", add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
                for w in words]

    def sync_weights(self, model, iteration):
        pass


def group_with(last_word: str, tok) -> list:
    """Rollout 0 says bread then ``last_word``; rollout 1 wins at once; rollout 2 says drum, eagle."""
    collector = RolloutCollector(make_fragile_trca_word_env, tok, PromptSettings(), max_steps=2)
    try:
        (group,) = collector.collect(ScriptedTurns(tok, [["bread", "apple", "drum"], [last_word, "eagle"]]),
                                     [("pick-0", 0)], group_size=3, timings=RolloutTimings())
    finally:
        collector.close()
    return group


@pytest.mark.parametrize("estimator", ["grpo", "trca"])
def test_a_rollout_ended_by_a_policy_failure_never_scores_above_its_normal_ending(estimator):
    _, tok = build_tiny_model(0)
    broken, normal = group_with("crash", tok), group_with("chair", tok)
    assert broken[0].error is None and normal[0].error is None  # both are trained on
    assert broken[0].trajectory.outcome.success is False
    assert broken[0].trajectory.transitions[-1].facts.broke_engine
    assert broken[0].trajectory.transitions[-1].terminated and normal[0].trajectory.transitions[-1].truncated
    assert not normal[0].trajectory.transitions[-1].facts.broke_engine
    for group in (broken, normal):
        assign_advantages([group], resolve_estimator(estimator))
    for b, n in zip(broken[0].steps, normal[0].steps, strict=True):
        assert max(b.token_advantages) <= max(n.token_advantages) + 1e-9
        assert min(b.token_advantages) <= min(n.token_advantages) + 1e-9
    # the other rollouts are the same episodes in both groups
    assert [[s.response_text for s in r.steps] for r in broken[1:]] == [[s.response_text for s in r.steps]
                                                                        for r in normal[1:]]
    if estimator == "trca":  # the Invalidity penalty makes the failure step strictly worse
        assert sum(broken[0].steps[-1].token_advantages) < sum(normal[0].steps[-1].token_advantages)
