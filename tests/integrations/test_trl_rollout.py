"""One real TRL training step on ALFWorld with ``RubricGRPOTrainer`` and TRCA: the rollouts
are rubricgym episodes played by TRL's model, the advantages rubricgym's per-step ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from integrations.own_trainer_credit import own_trainer_advantages
from integrations.trl_setup import make_trainer, need_trl_stack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    need_trl_stack()
    trainer = make_trainer(tmp_path_factory.mktemp("trl"))
    lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    trainer.train()
    after = {n: p.detach() for n, p in trainer.model.named_parameters() if "lora_" in n}
    yield trainer, lora, after
    trainer.rollout_func.close()


def test_advantages_are_2d_and_equal_the_own_trainer_s(trained):
    trainer, _, _ = trained
    advantages = trainer.last_advantages
    episodes = trainer.last_episodes
    assert advantages.dim() == 2 and advantages.shape[0] == len(episodes) == 4
    expected = own_trainer_advantages(episodes, "trca", 2, advantages.shape[1])
    np.testing.assert_allclose(advantages.numpy(), expected, atol=1e-6)
    assert advantages.abs().sum() > 0


def test_env_and_reasoning_tokens_get_zero_and_steps_differ(trained):
    trainer, _, _ = trained
    advantages, env_mask = trainer.last_advantages, trainer.last_env_mask
    assert env_mask is not None and (env_mask == 0).any()
    assert not advantages[env_mask == 0].any()
    for row, episode in enumerate(trainer.last_episodes):
        assert len(episode.steps) == 3 and episode.truncated_by == "max_steps"
        for s in episode.steps:
            assert s.action is not None and s.reasoning is not None
            assert env_mask[row, s.response[0]: s.response[1]].all()
            assert not advantages[row, s.reasoning[0]: s.reasoning[1]].any()
            assert s.info["rubric"]["trca"]["r_TRCA"] is not None
        firsts = [float(advantages[row, s.action[0]]) for s in episode.steps]
        assert len(set(firsts)) > 1
    keys = [e.group_key for e in trainer.last_episodes]
    assert keys[0] == keys[1] != keys[2] == keys[3]


def test_the_step_trains_the_lora_weights(trained):
    trainer, before, after = trained
    logged = [h for h in trainer.state.log_history if "grad_norm" in h]
    assert logged and logged[0]["grad_norm"] > 0
    assert any(not torch.equal(before[n], after[n]) for n in before)


def test_an_episode_past_max_completion_length_ends_truncated(tmp_path):
    need_trl_stack()
    trainer = make_trainer(tmp_path, groups=1)
    trainer.max_completion_length = 200  # the first observation turn (~300 tokens) does not fit
    trainer.args.max_steps = 1
    trainer.train()
    for episode in trainer.last_episodes:
        assert episode.truncated_by == "max_completion_length" and episode.success is False
        assert len(episode.steps) == 1
    assert trainer.last_advantages.shape[1] <= 200
    trainer.rollout_func.close()


def test_gigpo_trains_through_rubric_grpo_trainer(tmp_path):
    """The drift users hit (issue 50): `RubricGRPOTrainer(estimator="gigpo")` failed its first
    step for want of the observation anchors. It trains now, with the values every caller gets."""
    from rubricgym.contract import Trajectory
    from rubricgym.estimators import group_step_advantages, trajectory_rollout
    from rubricgym.integrations.episodes import completion_advantages

    need_trl_stack()
    trainer = make_trainer(tmp_path, estimator="gigpo", groups=1)
    try:
        trainer.train()
        episodes, advantages = trainer.last_episodes, trainer.last_advantages.numpy()
        again, _ = completion_advantages("gigpo", episodes, 2, advantages.shape[1])
        np.testing.assert_allclose(advantages, again, atol=1e-6)
        stored = group_step_advantages("gigpo", [trajectory_rollout(Trajectory.from_json_line(str(e.trajectory)))
                                                 for e in episodes])
        for row, (episode, values) in enumerate(zip(episodes, stored, strict=True)):
            assert all(s.anchor is not None for s in episode.steps)
            for step, value in zip(episode.steps, values, strict=True):
                assert advantages[row, step.response[0]] == pytest.approx(value, abs=1e-6)
    finally:
        trainer.rollout_func.close()
