"""Per-token advantages and masks for the trainer's step samples, by resolved estimator."""

from __future__ import annotations

import numpy as np
import pytest

from credit_helpers import ScriptedJudge

from rubricgym.contract import Facts, ParsedAction, Trajectory, Transition
from rubricgym.credit.grpo import grpo_advantages
from rubricgym.credit.trca import RolloutSignals, trca_group_step_advantages
from rubricgym.estimators import MissingCreditInput, SettingConflict, estimator_names, resolve_estimator
from rubricgym.trainers.advantages import assign_advantages
from rubricgym.trainers.rollout import Rollout, StepSample


def assign(groups, name, **settings):
    assign_advantages(groups, resolve_estimator(name, **{k: v for k, v in settings.items() if k != "judge"}),
                      **({"judge": settings["judge"]} if "judge" in settings else {}))


def _signals(rollout):
    return RolloutSignals(r_f=[s.info["rubric"]["trca"]["r_F"] for s in rollout.steps],
                          r_b=[s.info["rubric"]["trca"]["r_B"] for s in rollout.steps],
                          env_rewards=[s.env_reward for s in rollout.steps],
                          context_keys=[s.context_key for s in rollout.steps],
                          r_trca=[s.info["rubric"]["trca"]["r_TRCA"] for s in rollout.steps])


def _step(reward_f, reward_b, env, key, n=10, reasoning=(1, 4), action=(6, 9)):
    trca = {"r_F": reward_f, "r_B": reward_b, "r_TRCA": 0.2 * reward_f + 0.8 * reward_b}
    return StepSample(prompt_ids=[1, 2, 3], response_ids=list(range(10, 10 + n)), response_text="",
                      reasoning_tokens=reasoning, action_tokens=action, reward=trca["r_TRCA"] + env,
                      env_reward=env, context_key=key, info={"rubric": {"trca": trca}})


def _group():
    """Three rollouts of one task: one wins; contexts repeat across rollouts."""
    r0 = Rollout("t", 1, 0, 0, [_step(0.2, 0.5, 0.0, "s0"), _step(0.2, 0.5, 1.0, "s1")])
    r1 = Rollout("t", 1, 0, 1, [_step(-0.2, 0.0, 0.0, "s0"), _step(0.0, 0.0, 0.0, "s1", action=None)])
    r2 = Rollout("t", 1, 0, 2, [_step(0.0, 0.0, 0.0, "s0", reasoning=None, n=7, action=(0, 7))])
    return [r0, r1, r2]


def test_trca_puts_its_credit_on_action_tokens_only():
    group = _group()
    assign([group], "trca", gamma=0.95)
    expected = trca_group_step_advantages([_signals(r) for r in group], gamma=0.95)
    for rollout, values in zip(group, expected):
        for step, value in zip(rollout.steps, values):
            adv, mask = np.array(step.token_advantages), np.array(step.loss_mask)
            if step.reasoning_tokens:
                lo, hi = step.reasoning_tokens
                assert not mask[lo:hi].any() and (adv[lo:hi] == 0).all()  # reasoning is masked
            if step.action_tokens is None:
                assert not mask.any()  # nothing parsed: nothing to credit
                continue
            lo, hi = step.action_tokens
            assert mask[lo:hi].all() and mask.sum() == hi - lo
            assert adv[lo:hi] == pytest.approx(value)
    assert any(abs(v) > 0 for values in expected for v in values)


def test_trca_without_the_wrapper_is_a_clear_error():
    group = _group()
    group[0].steps[0].info = {}
    with pytest.raises(MissingCreditInput, match="TRCA reward wrapper"):
        assign([group], "trca")


def test_grpo_is_uniform_over_the_whole_response():
    group = _group()
    assign([group], "grpo")
    a = grpo_advantages([r.env_return for r in group])
    for rollout, value in zip(group, a):
        for step in rollout.steps:
            assert all(step.loss_mask) and step.token_advantages == pytest.approx([value] * len(step.response_ids))


def test_the_baselines_put_their_values_on_every_response_token():
    """RLOO from the returns; GiGPO from the env rewards and, as anchors, the observations each
    step acted on, read from the rollout's trajectory (without one, it says so)."""
    from rubricgym.credit.baselines import gigpo_step_advantages, rloo_advantages

    group = _group()
    assign([group], "rloo")
    for rollout, value in zip(group, rloo_advantages([r.env_return for r in group])):
        for step in rollout.steps:
            assert all(step.loss_mask) and step.token_advantages == pytest.approx([value] * len(step.response_ids))
    assert group[0].steps[0].token_advantages[0] == pytest.approx(1.0)  # 1 - mean(0, 0)

    anchors = [["start", "a"], ["start", "b"], ["start"]]  # step 0 of every rollout acted on "start"
    for rollout, seen in zip(group, anchors):
        for step, anchor in zip(rollout.steps, seen):
            step.anchor = anchor
    assign([group], "gigpo", gamma=0.9)
    want = gigpo_step_advantages([[s.env_reward for s in r.steps] for r in group],
                                 [["start", "a"], ["start", "b"], ["start"]], gamma=0.9)
    for rollout, values in zip(group, want):
        for step, value in zip(rollout.steps, values):
            assert step.token_advantages == pytest.approx([value] * len(step.response_ids))
    assert want[0][0] != want[0][1]  # the shared first step carries its own step advantage
    group[2].steps[0].anchor = None
    with pytest.raises(MissingCreditInput, match="needs each step's observation"):
        assign([group], "gigpo")


def test_every_documented_estimator_is_selectable():
    assert {"grpo", "rloo", "gigpo", "gigpo_mean", "gigpo_context", "trca", "trca_no_rf", "trca_no_rb", "draco",
            "draco_static", "draco_static_credit", "draco_dynamic"} <= set(estimator_names())
    with pytest.raises(ValueError, match="unknown advantage"):
        assign([_group()], "ppo")


def _draco_group():
    group = _group()[:2]
    for r in group:
        transitions = [Transition(step=k, response=s.response_text, action=ParsedAction(ok=True, action="x"),
                                  observation="", facts=Facts()) for k, s in enumerate(r.steps)]
        r.trajectory = Trajectory(benchmark="B", task_id="t", instruction="do it", transitions=transitions)
    return group


@pytest.mark.parametrize("estimator", ["draco", "draco_static_credit", "draco_dynamic", "draco_static"])
def test_draco_step_credit_fills_each_steps_tokens_and_nothing_else(estimator):
    from rubricgym.credit.draco import draco_step_advantages

    group = _draco_group()
    verdicts = [[("pass", [1]), ("fail", [0])], [("fail", [0, 1]), ("fail", [1])]]

    assign_advantages([group], resolve_estimator(estimator), judge=ScriptedJudge(verdicts), iteration=1)
    # the same numbers straight from the credit function
    result = ScriptedJudge(verdicts).score_group("do it", [r.trajectory for r in group], {
        "draco": "dynamic/credit", "draco_static_credit": "static/credit",
        "draco_dynamic": "dynamic/no-credit", "draco_static": "static/no-credit"}[estimator])
    for i, rollout in enumerate(group):
        n_j = [len(s.response_ids) for s in rollout.steps]
        a = draco_step_advantages(result.variant, result.rollouts[i].advantage, n_j,
                                  result.rollouts[i].step_passes, result.rollouts[i].step_fails)
        for step, a_j in zip(rollout.steps, a):
            assert all(step.loss_mask)  # every token of the step carries a_j (incl. reasoning)
            assert step.token_advantages == pytest.approx([a_j] * len(step.response_ids))
        # conservation: sum_j n_j a_j = A_i N
        total = sum(len(s.response_ids) * s.token_advantages[0] for s in rollout.steps)
        assert total == pytest.approx(result.rollouts[i].advantage * sum(n_j))
        # the verdicts behind a_j travel with the rollout (saved in its trajectory's meta)
        assert rollout.judge == result.rollout_record(i)
        assert rollout.judge["advantage"] == result.rollouts[i].advantage
        assert [(v["verdict"], v["steps"]) for v in rollout.judge["verdicts"]] == [
            (v, steps) for v, steps in verdicts[i]]
    assert result.rollouts[0].advantage > 0 > result.rollouts[1].advantage


def test_draco_gap_tokens_get_zero_in_the_training_batch():
    """Prompt/observation tokens and padding lie outside every step: zero advantage, no loss."""
    from rubricgym.trainers.update import collate

    group = _group()
    assign([group], "grpo")
    batch = collate([s for r in group for s in r.steps], pad_id=0)
    resp_len = batch.response_len
    assert batch.advantages.shape[1] == resp_len  # advantages exist only over response columns
    assert not batch.loss_mask[~batch.response_mask].any()
    assert (batch.advantages[~batch.response_mask] == 0).all()


def test_draco_without_a_judge_is_a_clear_error():
    with pytest.raises(MissingCreditInput, match="DRACO judge"):
        assign([_draco_group()], "draco")


def test_gamma_has_one_source_the_library_unless_the_config_overrides_it():
    """The TRCA record carries the library's gamma; the trainer uses it by default, and a
    configured gamma overrides it with a SettingConflict naming both."""
    group = _group()
    for rollout in group:
        for step in rollout.steps:
            step.info["rubric"]["trca"]["gamma"] = 0.5
    assign([group], "trca")
    want = trca_group_step_advantages([_signals(r) for r in group], gamma=0.5)
    got = [[s.token_advantages[s.action_tokens[0]] for s in r.steps if s.action_tokens] for r in group]
    assert got[0] == pytest.approx(list(want[0]))
    with pytest.warns(SettingConflict, match=r"gamma: algorithm.gamma=0.95 is used; the operator library's gamma "
                      r"\(recorded\)=0.5 is ignored"):
        assign([group], "trca", gamma=0.95, setting_names={"gamma": "algorithm.gamma"})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingConflict)
        assign([group], "trca", gamma=0.5)
