"""The own-loop example (examples/own_loop.py, docs/own_loop.md) runs as a user would run it,
and its token advantages are the ones rubricgym's trainer puts on the same episodes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from requirements_guard import need

from rubricgym.models import build_tiny_model
from rubricgym.estimators import resolve_estimator
from rubricgym.trainers.advantages import assign_advantages
from rubricgym.trainers.rollout import Rollout, StepSample

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_loop.py"
ENVS = {"WebShop-Rubric-v0": ("bm25s", "rapidfuzz"), "ALFWorld-Rubric-v0": ("alfworld", "textworld")}


def own_loop():
    spec = importlib.util.spec_from_file_location("own_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def as_trainer_rollouts(group) -> list[Rollout]:
    """The same episodes as the trainer's rollouts (its step samples carry the same tokens)."""
    return [Rollout(task_id=traj.task_id, seed=traj.seed or 0, group=0, member=i, trajectory=traj, steps=[
        StepSample(prompt_ids=s.prompt_ids, response_ids=s.response_ids, response_text="",
                   reasoning_tokens=s.tokens.reasoning, action_tokens=s.tokens.action, reward=0.0,
                   env_reward=t.env_reward, context_key=t.context_key, info={"rubric": t.info["rubric"]})
        for s, t in zip(steps, traj.transitions, strict=True)])
        for i, (traj, steps) in enumerate(zip(group.trajectories, group.steps, strict=True))]


@pytest.mark.slow
@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_the_own_loop_places_the_trainers_token_advantages(env_id):
    for module in ENVS[env_id]:
        need(module, "pip install 'rubricgym[all]'")
    example = own_loop()
    model, tokenizer = build_tiny_model(seed=0)
    group = example.collect_group(env_id, 3, tokenizer, seed=1)
    assert len(group.trajectories) == 3 and len({t.task_id for t in group.trajectories}) == 1
    assert len({t.initial_observation for t in group.trajectories}) == 1  # one initial state
    credit = example.token_credit(group, "trca")
    rollouts = as_trainer_rollouts(group)
    assign_advantages([rollouts], resolve_estimator("trca"))
    nonzero = 0
    for rollout, rollout_credit in zip(rollouts, credit, strict=True):
        for sample, (advantages, mask) in zip(rollout.steps, rollout_credit, strict=True):
            np.testing.assert_allclose(advantages, sample.token_advantages, rtol=1e-12, atol=1e-12)
            assert mask.tolist() == sample.loss_mask
            if sample.reasoning_tokens is not None:  # reasoning never carries TRCA credit
                lo, hi = sample.reasoning_tokens
                assert not mask[lo:hi].any() and not advantages[lo:hi].any()
            nonzero += int(np.count_nonzero(advantages))
    assert nonzero > 0

    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = example.policy_gradient_step(model, optimizer, group, credit)
    assert np.isfinite(loss)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())


@pytest.mark.slow
def test_the_own_loop_script_runs_as_documented(capsys):
    need("bm25s", "pip install 'rubricgym[webshop]'")
    result = own_loop().main(["--env", "WebShop-Rubric-v0", "--group", "3", "--model", "tiny"])
    assert result["steps"] >= 3 and result["trained_tokens"] > 0 and np.isfinite(result["loss"])
    assert "trained_tokens" in capsys.readouterr().out
