"""Held-out evaluation: Wilson intervals, the benchmark's eval split, greedy decoding in one
batch per turn, the three evaluations of a run (tiny random model, word task)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from trainer.split_word_env import EVAL_ID, TRAIN_ID, SplitWordFacts
from trainer.word_env import make_trca_word_env

from rubricgym.adapter import TaskBinding
from rubricgym.benchmark import BenchmarkSpec, EnvIdSpec
from rubricgym.contract import load_jsonl
from rubricgym.models import build_tiny_model
from rubricgym.trainers.config import load_config
from rubricgym.trainers.evaluation import (
    EvalPlan,
    Evaluator,
    distinct_group_share,
    policy_entropy,
    wilson_interval,
)
from rubricgym.trainers.rollout import Rollout, StepSample
from rubricgym.trainers.trainer import EVALUATIONS_FILE, Trainer

ROOT = Path(__file__).resolve().parents[2]
SPLIT = [
    "model.name=tiny", f"env.id={TRAIN_ID}", "env.max_steps=2", "algorithm.advantage=grpo",
    "algorithm.group_size=2", "algorithm.tasks_per_iteration=1", "generation.max_new_tokens=6",
    "prompt.max_prompt_tokens=40", "warmup.steps=2", "warmup.games=2", "run.iterations=1",
    "run.progress=false", "run.tensorboard=false",
]


# ---- Wilson interval ----------------------------------------------------------------------
def test_wilson_interval_hand_checked():
    # 0/10: the upper end is z^2/(n+z^2) = 3.8415/13.8415
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.27753, abs=1e-5))
    # 1/12 by hand: centre (1/12 + z^2/24)/(1 + z^2/12) = 0.18437,
    # half-width z/(1 + z^2/12) * sqrt((1/12)(11/12)/12 + z^2/576) = 0.16951
    low, high = wilson_interval(1, 12)
    assert low == pytest.approx(0.01487, abs=1e-4) and high == pytest.approx(0.35388, abs=1e-4)
    assert wilson_interval(12, 12) == (pytest.approx(1 - 0.24249, abs=1e-5), 1.0)


@pytest.mark.parametrize("k,n", [(0, 0), (-1, 5), (6, 5)])
def test_wilson_interval_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError):
        wilson_interval(k, n)


@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_properties(kn):
    k, n = kn
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert (low == 0.0) == (k == 0) and (high == 1.0) == (k == n)
    mirror = wilson_interval(n - k, n)  # failures are successes seen the other way round
    assert math.isclose(low, 1 - mirror[1], abs_tol=1e-12) and math.isclose(high, 1 - mirror[0], abs_tol=1e-12)
    if k < n:
        assert wilson_interval(k + 1, n)[0] > low  # one more success never lowers the lower end


# ---- groups with something to compare ---------------------------------------------------
def _rollout(*responses: list[int]) -> Rollout:
    steps = [StepSample(prompt_ids=[1], response_ids=list(r), response_text="", reasoning_tokens=None,
                        action_tokens=None, reward=0.0, env_reward=0.0) for r in responses]
    return Rollout(task_id="t", seed=0, group=0, member=0, steps=steps)


def test_distinct_group_share_counts_groups_whose_rollouts_differ():
    same = [_rollout([1, 2], [3]), _rollout([1, 2], [3])]
    other_second_step = [_rollout([1, 2], [3]), _rollout([1, 2], [4])]
    shorter = [_rollout([1, 2]), _rollout([1, 2], [3])]
    assert distinct_group_share([same]) == 0.0
    assert distinct_group_share([same, other_second_step, shorter, [_rollout([9])]]) == pytest.approx(2 / 3)
    assert distinct_group_share([]) == 0.0


# ---- the evaluator ------------------------------------------------------------------------
class ScriptedPolicy:
    """Answers by task (read from the prompt), tokenized like a model's output; counts calls."""

    def __init__(self, tok, answer):
        self.tok, self.answer, self.calls = tok, answer, []

    def generate(self, prompts):
        self.calls.append(len(prompts))
        return [self.tok(self.answer(len(self.calls), k), add_special_tokens=False)["input_ids"]
                + [self.tok.eos_token_id] for k in range(len(prompts))]


def test_evaluator_steps_all_tasks_together_and_reports_trca_parsed_and_interval():
    model, tok = build_tiny_model(0)
    config = load_config(None, ["env.max_steps=3", "prompt.max_prompt_tokens=40"])
    plan = EvalPlan(env_id=None, split="test", held_out=True, tasks=[("pick-0", 1), ("pick-1", 2), ("pick-2", 3)])
    evaluator = Evaluator(config, plan, lambda: make_trca_word_env(max_steps=3, num_tasks=3), model, tok)
    # turn 1: task 0 wins, task 1 answers a wrong word, task 2 writes no action; then everyone loses
    script = {(1, 0): "<think>t</think><action>apple</action>", (1, 1): "<action>bread</action>",
              (1, 2): "no tags at all"}
    evaluator.generator = policy = ScriptedPolicy(tok, lambda turn, k: script.get((turn, k), "<action>drum</action>"))
    try:
        result = evaluator.run("after")
    finally:
        evaluator.close()
    assert policy.calls == [3, 2, 2]  # one batched call per turn over the still-running games
    assert (result.episodes, result.successes) == (3, 1)
    assert (result.success_ci95_low, result.success_ci95_high) == wilson_interval(1, 3)
    assert [t.steps for t in result.tasks] == [1, 3, 3] and result.steps_mean == pytest.approx(7 / 3)
    assert result.action_parsed_rate == pytest.approx(6 / 7)  # 7 steps, one without an action
    assert result.trca_reward_mean is not None  # the TRCA wrapper's r_TRCA, per step
    per_step = [float(s.info["rubric"]["trca"]["r_TRCA"]) for r in evaluator.last_rollouts for s in r.steps]
    assert result.trca_reward_mean == pytest.approx(sum(per_step) / len(per_step))
    assert result.metrics()["success_rate"] == pytest.approx(1 / 3)


def test_greedy_evaluation_is_deterministic_and_uses_the_held_out_split(tmp_path):
    trainer = Trainer(load_config(None, SPLIT + ["warmup.enabled=false"]), tmp_path / "run")
    try:
        plan = trainer.held_out.plan
        assert plan.held_out and plan.env_id == EVAL_ID
        assert [t for t, _ in plan.tasks] == ["held-0", "held-1", "held-2"]  # the spec's eval split
        assert set(trainer.tasks).isdisjoint(t for t, _ in plan.tasks)
        first = trainer.held_out.run("a", sample_seed=1)
        torch.manual_seed(123)  # a different global RNG state changes nothing under greedy decoding
        second = trainer.held_out.run("b", sample_seed=2)
        responses = [[s.response_ids for s in r.steps] for r in trainer.held_out.last_rollouts]
        assert first.decoding == "greedy" and first.episodes == 3
        assert [t.model_dump() for t in first.tasks] == [t.model_dump() for t in second.tasks]
        assert all(len(r) >= 1 for r in responses)
    finally:
        trainer.close()


def test_an_eval_split_that_shares_training_tasks_is_not_called_held_out(tmp_path, caplog):
    """E.g. one data file passed to both ids: the plan says so instead of reporting held-out numbers."""
    trainer = Trainer(load_config(None, SPLIT + ["warmup.enabled=false", f"evaluation.env_id={TRAIN_ID}"]),
                      tmp_path / "run")
    try:
        plan = trainer.held_out.plan
        assert not plan.held_out and plan.env_id == TRAIN_ID
        assert plan.split == f"{TRAIN_ID}, NOT held out: 4 of its 4 tasks are training tasks"
        assert "not held out" in caplog.text
    finally:
        trainer.close()


def test_evaluation_env_kwargs_replace_the_training_env_kwargs_on_the_held_out_id(tmp_path):
    """Training kwargs that point the env at other data (here: the train split) reach the held-out
    env too, by default; ``evaluation.env_kwargs`` gives the held-out env its own."""
    inherited = Trainer(load_config(None, SPLIT + ["warmup.enabled=false", "env.kwargs={split: train}"]),
                        tmp_path / "inherited")
    try:
        assert not inherited.held_out.plan.held_out  # the eval id made with split=train: the train tasks
    finally:
        inherited.close()
    own = Trainer(load_config(None, SPLIT + ["warmup.enabled=false", "env.kwargs={split: train}",
                                             "evaluation.env_kwargs={}"]), tmp_path / "own")
    try:
        plan = own.held_out.plan
        assert plan.held_out and [t for t, _ in plan.tasks] == ["held-0", "held-1", "held-2"]
        assert own.tasks[:1] == ["pick-0"]  # training still uses env.kwargs
    finally:
        own.close()


def test_without_a_held_out_split_the_train_tasks_of_iteration_one_are_evaluated(tmp_path):
    settings = [s for s in SPLIT if not s.startswith("env.id")] + [
        "env.factory=word", "warmup.enabled=false"]
    trainer = Trainer(load_config(None, settings), tmp_path / "run")
    try:
        plan = trainer.held_out.plan
        assert not plan.held_out and plan.tasks == trainer.tasks_for(0, 1)
    finally:
        trainer.close()


def test_a_run_records_three_evaluations_with_intervals(tmp_path):
    trainer = Trainer(load_config(None, SPLIT), tmp_path / "run")
    summary = trainer.train()
    trainer.close()
    for label in ("before", "after_warmup", "after"):
        numbers = summary[label]
        assert numbers["episodes"] == 3 and numbers["held_out"]
        assert (numbers["success_ci95_low"], numbers["success_ci95_high"]) == wilson_interval(numbers["successes"], 3)
        assert {"action_parsed_rate", "steps_mean", "return_mean"} <= set(numbers)
    stored = json.loads((tmp_path / "run" / EVALUATIONS_FILE).read_text())
    assert [t["task_id"] for t in stored["after"]["tasks"]] == ["held-0", "held-1", "held-2"]
    episodes = load_jsonl(tmp_path / "run" / "evaluations" / "after.jsonl")  # what the policy did
    assert [t.task_id for t in episodes] == ["held-0", "held-1", "held-2"]
    assert summary["eval_tasks"] == ["held-0", "held-1", "held-2"] and summary["eval_decoding"] == "greedy"
    assert summary["warmup"]["policy_entropy"] > 0.0
    assert 0.0 <= summary["distinct_group_share"] <= 1.0
    assert "distinct_group_share" in trainer.read_metrics()[0]
    assert {m["eval"] for m in trainer.read_metrics(None) if "eval" in m} == {"before", "after_warmup", "after"}
    # what benchmarks/demo_results.py makes of the run folder (the main job's result file)
    spec = importlib.util.spec_from_file_location("demo_results", ROOT / "benchmarks" / "demo_results.py")
    demo_results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo_results)
    record = demo_results.demo_record(tmp_path / "run", command="a test")
    assert record["command"] == "a test" and record["evaluations"]["after"] == summary["after"]
    assert [m["iteration"] for m in record["rl"]["per_iteration"]] == [m["iteration"] for m in trainer.read_metrics()]
    rl_helped = summary["after"]["success_rate"] > summary["after_warmup"]["success_rate"]
    assert record["target"]["success_after_rl_above_warm_start"] == rl_helped


def test_before_is_evaluated_once_without_a_warm_start_and_not_again_on_resume(tmp_path):
    trainer = Trainer(load_config(None, SPLIT + ["warmup.enabled=false", "run.iterations=2"]), tmp_path / "run")
    trainer.train(stop_after=1)
    trainer.close()
    before = json.loads((tmp_path / "run" / EVALUATIONS_FILE).read_text())["before"]
    resumed = Trainer.from_run_dir(tmp_path / "run")
    summary = resumed.train()
    resumed.close()
    stored = json.loads((tmp_path / "run" / EVALUATIONS_FILE).read_text())
    assert stored["before"] == before and "after" in stored and "after_warmup" not in summary
    assert [m["eval"] for m in resumed.read_metrics(None) if "eval" in m] == ["before", "after"]


def test_a_warm_start_without_its_evaluations_is_not_evaluated_as_before(tmp_path):
    """``warmup.evaluate=false`` skips the warm start's two evaluations; RL must not then record
    the warm-started policy under the label of the untrained one."""
    trainer = Trainer(load_config(None, SPLIT + ["warmup.enabled=true", "warmup.evaluate=false", "run.iterations=1"]),
                      tmp_path / "run")
    try:
        trainer.train()
    finally:
        trainer.close()
    stored = json.loads((tmp_path / "run" / EVALUATIONS_FILE).read_text())
    assert sorted(stored) == ["after"]


def test_policy_entropy_matches_the_distributions_it_averages():
    model, tok = build_tiny_model(0)
    sample = StepSample(prompt_ids=[5, 6, 7], response_ids=[8, 9], response_text="", reasoning_tokens=None,
                        action_tokens=None, reward=0.0, env_reward=0.0)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[5, 6, 7, 8, 9]])).logits[0, 2:4].float()
    expected = float(-(logits.log_softmax(-1).exp() * logits.log_softmax(-1)).sum(-1).mean())
    assert policy_entropy(model, [sample], tok.pad_token_id) == pytest.approx(expected, rel=1e-4)
    assert 0.0 < expected <= math.log(logits.shape[-1])


def test_a_spec_eval_id_must_name_another_of_its_env_ids():
    with pytest.raises(ValueError, match="eval_id"):
        BenchmarkSpec(name="WordPickSplit", facts_model=SplitWordFacts, binding_model=TaskBinding, binder="x:y",
                      adapter="x:y", env_ids=(EnvIdSpec("A-v0", eval_id="B-v0"),))
