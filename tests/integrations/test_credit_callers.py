"""One credit path for every caller (issue 50): every registered estimator gives identical
per-step values through the own trainer (``assign_advantages`` over the rollout collector's
samples), the TRL route (``completion_advantages`` over ``RubricRollout``'s episodes, what
``RubricGRPOTrainer`` calls) and stored trajectories (``group_step_advantages``), on the same
real ALFWorld episodes; and hand-computed values for ``grpo``, ``gigpo`` and ``trca`` through
each caller, so that a bug all callers share cannot pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import pytest
from credit_helpers import ScriptedJudge
from requirements_guard import need

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.contract import Facts, ParsedAction, Trajectory, Transition
from rubricgym.estimators import (Estimator, estimator_names, get_estimator, group_step_advantages, register_estimator,
                                  resolve_estimator)
from rubricgym.estimators.registry import ESTIMATORS
from rubricgym.integrations.episodes import Episode, EpisodeStep, completion_advantages
from rubricgym.integrations.trl_rollout import RubricRollout
from rubricgym.prompts import PromptSettings
from rubricgym.registration import expert_of
from rubricgym.trainers.advantages import assign_advantages
from rubricgym.trainers.rollout import Rollout, RolloutCollector, StepSample

ENV_ID = "ALFWorld-Rubric-v0"
G = 3


# ---- the same real episodes, played by the own trainer's collector and by TRL's rollout ------
class Scripted:
    """Token ids of scripted replies, per rollout (row) and turn; the rows still playing at a
    turn are those whose script is longer (the expert's ends with the win, the others run to
    the step budget)."""

    def __init__(self, tokenizer: Any, scripts: Sequence[Sequence[str]]):
        self.ids = [[list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
                     for text in script] for script in scripts]
        self.turn = 0

    def generate(self, prompts: Sequence[Any]) -> list[list[int]]:
        active = [row for row in self.ids if len(row) > self.turn]
        assert len(active) == len(prompts), "the scripts' lengths must follow the episodes' ends"
        out = [row[self.turn] for row in active]
        self.turn += 1
        return out


class ScriptedRollout(RubricRollout):
    """TRL's rollout with the scripted replies in place of the model's sampling (the env, the
    prompt, the spans and the records stay real)."""

    def __init__(self, scripted: Scripted, **kwargs: Any):
        super().__init__(ENV_ID, **kwargs)
        self.scripted = scripted

    def _generate(self, trainer: Any, sequences: Sequence[list[int]], max_new_tokens: int) -> list[list[int]]:
        return self.scripted.generate(sequences)


class TRLTrainerStandIn:
    """What ``RubricRollout`` reads of a TRL trainer."""

    def __init__(self, tokenizer: Any, rows: list[dict[str, Any]]):
        self.processing_class, self.rubricgym_rows, self.max_completion_length = tokenizer, rows, 100_000


def _verdicts(i: int, trajectory: Trajectory) -> list[tuple[str, list[int]]]:
    """c1: the rollout won (cites its last step); c2: it never looked around (cites its first)."""
    last = max(0, trajectory.num_steps - 1)
    looked = any((t.action.action or "") == "look" for t in trajectory.transitions)
    return [("pass" if trajectory.outcome.success else "fail", [last]), ("fail" if looked else "pass", [0])]


@pytest.fixture(scope="module")
def played():
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    from rubricgym.models import load_causal_lm

    _, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)
    env = gym.make(ENV_ID, max_steps=6)
    _, info = env.reset(seed=11)
    task_id = str(info["task_id"])
    expert, adapter = expert_of(env)
    grammar = adapter.grammar
    plan = [grammar.render(a) for a in expert(adapter)]
    env.close()
    budget = len(plan) + 2
    wander = ["look", "inventory", "look", "go to the moon", "inventory", "look"]
    scripts = [plan,  # wins when its plan ends
               [grammar.render(a) for a in (wander * 3)[:budget]],
               ["I think I should act."] + [grammar.render(a) for a in (["inventory"] * budget)[:budget - 1]]]
    # the own trainer: the collector's step samples and trajectories
    collector = RolloutCollector(lambda: gym.make(ENV_ID, max_steps=budget), tokenizer, PromptSettings(), budget)
    try:
        [group] = collector.collect(Scripted(tokenizer, scripts), [(task_id, 5)], G)
    finally:
        collector.close()
    # TRL's rollout: one completion per row, the same replies
    rollout = ScriptedRollout(Scripted(tokenizer, scripts), max_steps=budget)
    try:
        rows = [{"seed": 5, "task_id": task_id} for _ in range(G)]
        out = rollout(["p"] * G, TRLTrainerStandIn(tokenizer, rows))
    finally:
        rollout.close()
    episodes = [Episode.from_dict(e) for e in out["rubricgym_episode"]]
    length = max(len(c) for c in out["completion_ids"])
    assert group[0].success and not group[1].success and not group[2].success
    assert [len(r.steps) for r in group] == [len(e.steps) for e in episodes] == [len(s) for s in scripts]
    return group, episodes, length


def _own(group: list[Rollout], name: str) -> list[list[float]]:
    assign_advantages([group], resolve_estimator(name), judge=ScriptedJudge(_verdicts))
    return [[_one(step.token_advantages, step.loss_mask) for step in r.steps] for r in group]


def _trl(episodes: list[Episode], length: int, name: str) -> list[list[float]]:
    values, mask = completion_advantages(name, episodes, G, length, judge=ScriptedJudge(_verdicts))
    out = []
    for row, episode in enumerate(episodes):
        spans = [s.action if get_estimator(name).placement == "action" else s.response for s in episode.steps]
        out.append([_one(values[row, a:b], mask[row, a:b]) if (a, b) != (None, None) else None
                    for a, b in ((sp if sp is not None else (None, None)) for sp in spans)])
    return out


def _stored(group: list[Rollout], name: str) -> list[list[float]]:
    trajectories = [r.trajectory for r in group]
    tokens = [[len(s.response_ids) for s in r.steps] for r in group]
    from rubricgym.estimators import trajectory_rollout

    values = group_step_advantages(name, [trajectory_rollout(t, n) for t, n in zip(trajectories, tokens, strict=True)],
                                   judge=ScriptedJudge(_verdicts))
    return [[float(v) for v in per_step] for per_step in values]


def _one(values: Sequence[float], mask: Sequence[bool]) -> float | None:
    """The one value a step's trained tokens carry (None: the step has none)."""
    trained = {float(v) for v, m in zip(values, mask, strict=True) if m}
    assert len(trained) <= 1, trained
    return trained.pop() if trained else None


def _placed(values: list[list[float]], group: list[Rollout], name: str) -> list[list[float | None]]:
    """Stored per-step values as the trainer would place them (None where no token is trained)."""
    action = get_estimator(name).placement == "action"
    return [[None if action and s.action_tokens is None else v for v, s in zip(vs, r.steps, strict=True)]
            for vs, r in zip(values, group, strict=True)]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_estimator_gives_the_same_values_through_every_caller(played, name):
    group, episodes, length = played
    own, trl = _own(group, name), _trl(episodes, length, name)
    stored = _placed(_stored(group, name), group, name)
    for a, b, c in zip(own, trl, stored, strict=True):
        assert a == pytest.approx(b, abs=1e-9) and a == pytest.approx(c, abs=1e-9)
    assert any(v for r in own for v in r if v is not None), f"{name}: every value 0, the comparison shows nothing"


@pytest.mark.slow
def test_a_registered_estimator_goes_the_same_way(played):
    """A plugin's estimator (here: the outcome on every step, doubled) through all three callers."""
    from rubricgym.credit.grpo import grpo_step_advantages

    register_estimator(Estimator("double_grpo_test", "test only", lambda inputs, est: [
        2 * v for v in grpo_step_advantages(inputs.outcomes, inputs.lengths, est.eps)]), replace=True)
    try:
        test_every_estimator_gives_the_same_values_through_every_caller(played, "double_grpo_test")
        group, _, _ = played
        assert _own(group, "double_grpo_test")[0][0] == pytest.approx(2 * _own(group, "grpo")[0][0])
    finally:
        ESTIMATORS.pop("double_grpo_test")


# ---- hand-computed values through each caller ------------------------------------------------
# Three rollouts of one task, two steps each (gamma 0.5, lambda 0.5):
#   A wins:  env [0, 1], keys (k0, k1), anchors (s, x), r_F [0.2, 0.4], r_B [0.1, 0.3]
#   B fails: env [0, 0], keys (k0, k2), anchors (s, y), r_F [-0.1, 0.0], r_B [0.0, 0.0]
#   C fails: env [0, 0], keys (k0, k1), anchors (s, x), r_F [0.2, 0.0], r_B [0.2, 0.0]
# GRPO: outcomes (1, 0, 0), mean 1/3, std sqrt(2)/3: A_E = (sqrt(2), -1/sqrt(2), -1/sqrt(2)).
# GiGPO: returns of the env reward A (0.5, 1), B (0, 0), C (0, 0); anchor s: (0.5, 0, 0) -> (sqrt(2),
#   -1/sqrt(2), -1/sqrt(2)); anchor x: A 1, C 0 -> (1, -1); y alone -> 0.
# TRCA: r_TRCA A (0.15, 0.35), B (-0.05, 0), C (0.2, 0); returns A (0.825, 1.35), B (-0.05, 0),
#   C (0.2, 0); key k0: (0.825, -0.05, 0.2), mean 0.325, std sqrt(0.40625 / 3) = 0.3679900 -> (1.3587324,
#   -1.0190493, -0.3396831); k1: (1.35, 0) -> (1, -1); k2 alone -> 0.
R2, H = 2 ** 0.5, 2 ** -0.5
HAND = {
    "grpo": [[R2, R2], [-H, -H], [-H, -H]],
    "gigpo": [[2 * R2, R2 + 1], [-2 * H, -H], [-2 * H, -H - 1]],
    "trca": [[R2 + 1.3587324, R2 + 1], [-H - 1.0190493, -H], [-H - 0.3396831, -H - 1]],
}
ARRAYS = [  # env, keys, anchors, r_F, r_B, success
    ([0.0, 1.0], ["k0", "k1"], ["s", "x"], [0.2, 0.4], [0.1, 0.3], True),
    ([0.0, 0.0], ["k0", "k2"], ["s", "y"], [-0.1, 0.0], [0.0, 0.0], False),
    ([0.0, 0.0], ["k0", "k1"], ["s", "x"], [0.2, 0.0], [0.2, 0.0], False),
]


def _info(r_f: float, r_b: float) -> dict[str, Any]:
    return {"rubric": {"trca": {"r_F": r_f, "r_B": r_b, "r_TRCA": 0.2 * r_f + 0.8 * r_b, "lambda": 0.8,
                                "gamma": 0.95}}}


def _hand_rollouts() -> list[Rollout]:
    out = []
    for m, (env, keys, anchors, r_f, r_b, _) in enumerate(ARRAYS):
        steps = [StepSample([1], [7, 8, 9], "", None, (1, 3), 0.0, e, k, _info(f, b), anchor=a)
                 for e, k, a, f, b in zip(env, keys, anchors, r_f, r_b, strict=True)]
        out.append(Rollout("t", 0, 0, m, steps))
    return out


def _hand_episodes() -> list[Episode]:
    out = []
    for env, keys, anchors, r_f, r_b, success in ARRAYS:
        steps = [EpisodeStep((4 * t, 4 * t + 3), (4 * t + 1, 4 * t + 3), None, e, 0.0, k, _info(f, b), a)
                 for t, (e, k, a, f, b) in enumerate(zip(env, keys, anchors, r_f, r_b, strict=True))]
        out.append(Episode("t", 0, "t|0", steps, success))
    return out


def _hand_trajectories() -> list[Trajectory]:
    out = []
    for env, keys, anchors, r_f, r_b, success in ARRAYS:
        transitions = [Transition(step=t, response="", action=ParsedAction(ok=True, action="a"),
                                  observation=anchors[t + 1] if t + 1 < len(anchors) else "end", facts=Facts(),
                                  context_key=k, env_reward=e, info=_info(f, b))
                       for t, (e, k, f, b) in enumerate(zip(env, keys, r_f, r_b, strict=True))]
        traj = Trajectory(benchmark="base", task_id="t", initial_observation=anchors[0], transitions=transitions)
        out.append(traj.model_copy(update={"outcome": traj.outcome.model_copy(update={"success": success})}))
    return out


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_computed_values_through_each_caller(name):
    settings = {"gamma": 0.5, "lam": 0.5}
    est = resolve_estimator(name, **settings)
    group = _hand_rollouts()
    assign_advantages([group], est)
    own = [[_one(s.token_advantages, s.loss_mask) for s in r.steps] for r in group]
    values, mask = completion_advantages(est, _hand_episodes(), 3, 8)
    span = (lambda t: (4 * t + 1, 4 * t + 3)) if est.placement == "action" else (lambda t: (4 * t, 4 * t + 3))
    trl = [[_one(values[i, slice(*span(t))], mask[i, slice(*span(t))]) for t in range(2)] for i in range(3)]
    stored = [v.tolist() for v in group_step_advantages(est, _hand_trajectories())]
    for got in (own, trl, stored):
        for row, want in zip(got, HAND[name], strict=True):
            assert row == pytest.approx(want, abs=1e-5), (name, got)


def test_gigpo_through_the_trl_route_reads_the_episodes_anchors():
    """The bug users hit: the TRL route built its signals without the observation anchors."""
    values, _ = completion_advantages("gigpo", _hand_episodes(), 3, 8)
    assert values[0, 0] == pytest.approx(2 * R2, abs=1e-5)


def test_every_registered_name_is_listed_where_estimators_are_listed():
    """The config's description, the CLI's help and docs/trainer.md's table come from (or are
    checked against) the registry."""
    from pathlib import Path

    from rubricgym.trainers.config import AlgorithmSettings

    import argparse

    from rubricgym.trainers import cli
    from rubricgym.trainers.study import cli as study

    docs = (Path(__file__).resolve().parents[2] / "docs" / "trainer.md").read_text(encoding="utf-8")
    description = AlgorithmSettings.model_fields["advantage"].description or ""
    helps = []
    for module in (cli, study):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        helps.append(parser.format_help())
    for name in estimator_names():
        est = get_estimator(name)
        needs = ", ".join(sorted(est.needs)) or "outcome"
        assert f"| `{name}` | {needs} | {est.placement} |" in docs, name
        assert name in description, name
        assert all(name in text for text in helps), name
