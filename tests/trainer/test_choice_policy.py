"""The study's small policy over admissible actions (issue 52): its features on hand-checked
states, its softmax, and its training with the estimator code on a real env."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from rubricgym.estimators import resolve_estimator
from rubricgym.trainers.choice_policy import ChoicePolicy, ChoiceState, Featurizer, fill_templates
from rubricgym.trainers.choice_training import ChoiceObjective, ChoiceTrainer
from trainer.word_env import CORRECT, WORDS, make_trca_word_env, make_word_env


def test_features_say_what_links_an_action_to_the_task():
    state = ChoiceState(instruction="buy a gray backpack, price lower than 50.00 dollars",
                        observation="results [SEP] b01 [SEP] gray backpack [SEP] $40.00 [SEP] b02 [SEP] red bag $90.00",
                        actions=("click[b01]", "click[b02]", "click[gray]", "click[buy now]"),
                        history=("search[x]", "click[gray]"))
    f = Featurizer()
    b01, b02, gray, buy = (set(f.names(state, a)) for a in state.actions)
    assert {"verb=click", "context_matches=2|click", "context_inst=gray", "context_inst=backpack",
            "context_number_within=True|click", "prev=click|click"} <= b01
    assert "context_number_within=False|click" in b02 and "context_matches=0|click" in b02
    assert {"inst|click|gray", "inst_matches=1|click", "repeat_previous"} <= gray  # chosen just before
    assert "pending=False|click|buy" in buy  # the only task-naming option is already taken
    assert "step=2|click" in buy


def test_the_first_policy_is_uniform_and_greedy_takes_the_best_score():
    policy = ChoicePolicy(Featurizer(dim=4096))
    state = ChoiceState("take the apple", "an apple and a pear", ("take apple", "take pear", "look"))
    assert policy.log_probs(state).exp().tolist() == pytest.approx([1 / 3] * 3)
    with torch.no_grad():
        for name in policy.featurizer.names(state, "take pear"):
            policy.weights.weight[policy.featurizer._id(name)] = 1.0
    index, logp = policy.act(state, greedy=True)
    assert index == 1 and logp == pytest.approx(float(policy.log_probs(state).detach()[1]))
    with pytest.raises(ValueError, match="at least one admissible action"):
        ChoiceState("x", "y", ())


def test_templates_are_filled_with_the_instruction():
    assert fill_templates(["search[<keywords>]", "click[b01]"], "Buy a Gray bag!") == ["search[buy a gray bag]",
                                                                                       "click[b01]"]


@pytest.mark.parametrize("estimator", ["grpo", "trca"])
def test_rl_with_the_estimator_code_learns_the_word(estimator):
    """On the word task (the right word among six, one try), sampled success starts near 1/6
    and reaches most rollouts within a few iterations, through group_step_values' advantages."""
    make = make_trca_word_env if estimator == "trca" else make_word_env
    trainer = ChoiceTrainer(lambda: make(max_steps=1), ["pick-0", "pick-1"], resolve_estimator(estimator),
                            ChoiceObjective(lr=0.3, epochs=2), group_size=8, tasks_per_iteration=2, seed=0)
    try:
        curve = [trainer.train_iteration().success_rate for _ in range(8)]
        assert curve[0] < 0.5 and max(curve[-3:]) >= 0.8, curve
        state = ChoiceState("say the secret word", "Words: " + " ".join(WORDS), tuple(WORDS))
        assert int(trainer.policy.log_probs(state).argmax()) == WORDS.index(CORRECT)
        assert trainer.evaluate([("pick-0", 5)]) == [True]
    finally:
        trainer.close()


def test_zero_advantages_leave_the_policy_as_it_was():
    """A group that all fails, under an outcome-only estimator: every advantage 0, no change."""
    trainer = ChoiceTrainer(lambda: make_word_env(max_steps=1), ["pick-0"], resolve_estimator("grpo"),
                            ChoiceObjective(entropy_coef=0.0), group_size=4, tasks_per_iteration=1, seed=3)
    try:
        groups = [[trainer.play("pick-0", 1) for _ in range(4)]]
        for r in groups[0]:
            r.success = False
            for s in r.steps:
                s.env_reward = 0.0
        before = trainer.policy.weights.weight.detach().clone()
        trainer._update(groups, [[torch.zeros(1).numpy() for _ in range(4)]])
        assert torch.equal(before, trainer.policy.weights.weight)
    finally:
        trainer.close()


def test_objective_refuses_an_unknown_loss_aggregation():
    """A misspelt aggregation is refused when the study's config loads, not at the first update."""
    with pytest.raises(ValidationError, match="loss_aggregation"):
        ChoiceObjective(loss_aggregation="rollout_mean")
    assert ChoiceObjective(loss_aggregation="step_mean").loss_aggregation == "step_mean"
