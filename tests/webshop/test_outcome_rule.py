"""The papers' binary outcome for A_E (issue 49, item 2): a WebShop group whose every purchase
was wrong scores partial rewards; under ``outcome="return"`` A_E ranks those partial scores,
under ``outcome="success"`` (WebShop's default) every rollout failed, so A_E = 0 and only the
step advantages A_S remain."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rubricgym.estimators import group_step_advantages, resolve_estimator
from rubricgym.trainers.config import EnvSettings, TrainConfig

WRONG_PURCHASES = ("b0rvdszftt", "b0x59j22v9", "b0ygaq7n8q")  # over the price; another product; no options chosen


@pytest.fixture(scope="module")
def all_failed():
    env = gym.make("WebShop-Rubric-v0", max_steps=6)
    group = []
    try:
        for product in WRONG_PURCHASES:
            obs, _ = env.reset(seed=1)
            grammar = env.unwrapped.adapter.grammar
            query = obs.split("[SEP]")[2].strip()
            for action in (f"search[{query}]", f"click[{product}]", "click[buy now]"):
                env.step(grammar.render(action))
            group.append(env.unwrapped.trajectory.model_copy(deep=True))
    finally:
        env.close()
    scores = [t.outcome.score for t in group]
    assert not any(t.outcome.success for t in group) and len(set(scores)) > 1 and all(s > 0 for s in scores)
    return group


def test_return_ranks_the_partial_scores_success_gives_a_zero_outcome_advantage(all_failed):
    returns = [sum(t.env_reward for t in traj.transitions) for traj in all_failed]
    by_return = group_step_advantages(resolve_estimator("grpo", outcome="return"), all_failed)
    order = np.argsort(returns)
    assert by_return[order[-1]][0] > 0 > by_return[order[0]][0]  # the best partial purchase is pushed up
    by_success = group_step_advantages(resolve_estimator("grpo", outcome="success"), all_failed)
    assert all(np.all(a == 0.0) for a in by_success)
    # TRCA: A_E = 0, so what is left is A_S alone: the steps still differ by their rubric returns
    trca = group_step_advantages(resolve_estimator("trca", outcome="success"), all_failed)
    assert any(np.any(a != 0.0) for a in trca)
    first_steps = [a[0] for a in trca]  # the identical search: one context group, standardized returns (A_E = 0)
    assert sum(first_steps) == pytest.approx(0.0, abs=1e-9) and max(first_steps) > 0


def test_webshop_trains_on_the_binary_outcome_by_default():
    est = TrainConfig(env=EnvSettings(id="WebShop-Rubric-v0")).estimator
    assert est.outcome == "success" and est.sources["outcome"] == "the benchmark's default"
    assert TrainConfig().estimator.outcome == "return"  # the main job: ALFWorld pays 1 for a win, 0 otherwise
