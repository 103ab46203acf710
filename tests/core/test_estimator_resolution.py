"""One resolution of an estimator (issue 50): one precedence rule for gamma, lambda, the outcome
and the objective, and every conflict reported the same way wherever it is set."""

from __future__ import annotations

import re
import warnings

import gymnasium as gym
import pytest
from credit_helpers import array_rollout

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.estimators import SettingConflict, group_step_values, resolve_estimator
from rubricgym.trainers.config import AlgorithmSettings, EnvSettings, TrainConfig

def _group(gamma: float = 0.95, lam: float = 0.8):
    return [array_rollout([0.0, 1.0], ["a", "b"], [0.1, 0.2], [0.0, 0.3], lam=lam, gamma=gamma, success=True),
            array_rollout([0.0, 0.0], ["a", "c"], [0.0, -0.1], [0.0, 0.0], lam=lam, gamma=gamma, success=False)]


def test_the_library_s_gamma_and_the_paid_r_trca_by_default():
    credit = group_step_values(resolve_estimator("trca"), _group(gamma=0.5))
    assert credit.estimator.gamma == 0.5 and credit.estimator.sources["gamma"].startswith("the operator library")
    assert credit.estimator.lam is None and credit.estimator.sources["lambda"] == "the reward's lambda (recorded)"
    assert resolve_estimator("grpo").gamma is None  # not settled before the records are read


@pytest.mark.parametrize(("where", "make"), [
    ("algorithm.gamma", lambda: group_step_values(TrainConfig(algorithm=AlgorithmSettings(gamma=0.9)).estimator,
                                                  _group())),
    ("RubricGRPOTrainer(gamma=)", lambda: group_step_values(resolve_estimator(
        "trca", gamma=0.9, setting_names={"gamma": "RubricGRPOTrainer(gamma=)"}), _group())),
])
def test_a_gamma_conflict_is_reported_the_same_way_wherever_it_is_set(where, make):
    pattern = f"gamma: {re.escape(where)}=0.9 is used; the operator library's gamma \\(recorded\\)=0.95 is ignored"
    with pytest.warns(SettingConflict, match=pattern):
        credit = make()
    assert credit.estimator.gamma == 0.9


def test_a_lambda_conflict_is_reported_the_same_way_wherever_it_is_set():
    # the trainer's setting against the reward's recorded lambda
    with pytest.warns(SettingConflict, match=r"lambda: algorithm.trca_lambda=0.5 is used; the reward's lambda "
                      r"\(recorded\)=0.8 is ignored"):
        group_step_values(TrainConfig(algorithm=AlgorithmSettings(trca_lambda=0.5)).estimator, _group())
    # the trainer's setting against an ablation's own lambda: the ablation wins
    with pytest.warns(SettingConflict, match=r"lambda: estimator 'trca_no_rf'=1.0 is used; "
                      r"algorithm.trca_lambda=0.5 is ignored"):
        config = TrainConfig(algorithm=AlgorithmSettings(advantage="trca_no_rf", trca_lambda=0.5))
    assert config.estimator.lam == 1.0
    # a reward spec's lambda against its library's, in the reward wrapper
    from rubricgym.trca import TRCAConfig

    with pytest.warns(SettingConflict, match=r"lambda: TRCAConfig.lam=0.5 is used; library '.+' lambda=0.8 is "
                      r"ignored"):
        env = gym.make("SearchQA-Rubric-v0", reward=TRCAConfig(lam=0.5))
    env.close()


def test_no_conflict_when_the_values_agree_or_an_ablation_defines_lambda():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingConflict)
        group_step_values(resolve_estimator("trca", gamma=0.95, lam=0.8), _group())
        group_step_values(resolve_estimator("trca_no_rb"), _group())  # its lambda 0 is its definition


def test_the_outcome_rule_the_setting_then_the_benchmark_s_default():
    assert resolve_estimator("trca").outcome == "return"
    assert resolve_estimator("trca", benchmark_outcome="success").outcome == "success"
    webshop = TrainConfig(env=EnvSettings(id="WebShop-Rubric-v0")).estimator
    assert (webshop.outcome, webshop.sources["outcome"]) == ("success", "the benchmark's default")
    with pytest.warns(SettingConflict, match=r"outcome: algorithm.outcome='return' is used; the benchmark's "
                      r"default='success' is ignored"):
        chosen = TrainConfig(env=EnvSettings(id="WebShop-Rubric-v0"),
                             algorithm=AlgorithmSettings(outcome="return")).estimator
    assert chosen.outcome == "return"
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        TrainConfig(algorithm=AlgorithmSettings(advantage="ppo"))


def test_the_objective_the_setting_over_the_estimator_s():
    est = resolve_estimator("trca", ratio_level="token", setting_names={"ratio_level": "algorithm.ratio_level"})
    assert (est.ratio_level, est.loss_aggregation, est.skip_zero_advantage) == ("token", "rollout_mean_step_mean",
                                                                                 False)
    assert est.sources["ratio_level"] == "algorithm.ratio_level"
    assert est.sources["loss_aggregation"] == "estimator 'trca'"
