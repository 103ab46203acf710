"""Run by tests/integrations/test_verl.py with the verl venv's python (.venvs/verl): real ALFWorld
episodes through verl's own ``compute_advantage`` with rubricgym's registered estimators.

    .venvs/verl/bin/python tests/integrations/verl_run.py TOKENIZER_DIR

Two groups (two tasks), three rollouts each of one seed: the expert's plan (wins), wandering
(runs out of steps) and a first reply with no action then ``inventory`` to the end. The episodes
are played by rubricgym's TRL rollout (``RubricRollout``) with these scripted replies in place
of a model's sampling, tokenised with SmolLM2's tokenizer: its completions, observation masks
and ``rubricgym_episode`` records become a verl ``DataProto`` (rows of the two groups
interleaved, so the groups come from ``uid`` alone). Per estimator, verl's ``compute_advantage``
must give exactly (float32) what rubricgym's ``completion_advantages`` gives the same episodes.
Prints one JSON line of results.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from transformers import AutoTokenizer

started = time.perf_counter()
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402

import rubricgym  # noqa: E402,F401  (registers the env ids)
from rubricgym.integrations.episodes import Episode, completion_advantages  # noqa: E402
from rubricgym.integrations.trl_rollout import RubricRollout  # noqa: E402
from rubricgym.estimators import resolve_estimator  # noqa: E402
from rubricgym.integrations.verl import ENV_ID_FIELD, EPISODE_FIELD, register_estimators, verl_name  # noqa: E402
from rubricgym.registration import expert_of, get_spec  # noqa: E402

verl_import_s = time.perf_counter() - started
ENV_ID = "ALFWorld-Rubric-v0"
WEBSHOP = "WebShop-Rubric-v0"
G = 3
NAMES = ["trca", "trca_no_rf", "trca_no_rb", "gigpo", "gigpo_mean", "gigpo_context", "rloo", "grpo"]


class Scripted(RubricRollout):
    """The TRL rollout with scripted replies (token ids per row and turn) in place of sampling;
    the env, the prompts, the spans and the records stay real."""

    def __init__(self, tokenizer: Any, scripts: Sequence[Sequence[str]], env_id: str = ENV_ID, **kwargs: Any):
        super().__init__(env_id, **kwargs)
        self.ids = [[list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
                     for text in script] for script in scripts]
        self.turn = 0

    def _generate(self, trainer: Any, sequences: Sequence[list[int]], max_new_tokens: int) -> list[list[int]]:
        active = [row for row in self.ids if len(row) > self.turn]
        assert len(active) == len(sequences), "the scripts' lengths must follow the episodes' ends"
        self.turn += 1
        return [row[self.turn - 1] for row in active]


class TrainerStandIn:
    """What ``RubricRollout`` reads of a TRL trainer."""

    def __init__(self, tokenizer: Any, rows: list[dict[str, Any]]):
        self.processing_class, self.rubricgym_rows, self.max_completion_length = tokenizer, rows, 100_000


def play(tokenizer: Any, task_seed: int, seed: int) -> dict[str, Any]:
    env = gym.make(ENV_ID)
    _, info = env.reset(seed=task_seed)
    task_id = str(info["task_id"])
    expert, adapter = expert_of(env)
    grammar = adapter.grammar
    plan = [grammar.render(a) for a in expert(adapter)]
    env.close()
    budget = len(plan) + 2
    wander = ["look", "inventory", "look", "go to the moon", "inventory", "look"]
    scripts = [plan,
               [grammar.render(a) for a in (wander * 3)[:budget]],
               ["I think I should act."] + [grammar.render(a) for a in (["inventory"] * budget)[:budget - 1]]]
    rollout = Scripted(tokenizer, scripts, max_steps=budget)
    try:
        return rollout(["p"] * G, TrainerStandIn(tokenizer, [{"seed": seed, "task_id": task_id} for _ in range(G)]))
    finally:
        rollout.close()


def play_webshop(tokenizer: Any) -> dict[str, Any]:
    """One WebShop group whose returns are not its successes: the expert's purchase (1.0, a
    success), the right product bought without its options (2/3, a failure), no purchase (0)."""
    env = gym.make(WEBSHOP)
    _, info = env.reset(seed=3)
    task_id = str(info["task_id"])
    expert, adapter = expert_of(env)
    plan = [adapter.grammar.render(a) for a in expert(adapter)]
    env.close()
    scripts = [plan, plan[:2] + plan[-1:], plan[:2] + ["<action>click[< prev]</action>"] * (len(plan) - 2)]
    rollout = Scripted(tokenizer, scripts, env_id=WEBSHOP, max_steps=len(plan))
    try:
        return rollout(["p"] * G, TrainerStandIn(tokenizer, [{"seed": 3, "task_id": task_id} for _ in range(G)]))
    finally:
        rollout.close()


def webshop_outcome(tokenizer: Any) -> dict[str, Any]:
    """The rows' env id decides the outcome A_E standardizes, as in rubricgym's own trainer
    (WebShop's: success); without the env id column, the registration's (the return)."""
    group = play_webshop(tokenizer)
    episodes = [Episode.from_dict(e) for e in group[EPISODE_FIELD]]
    length = max(len(c) for c in group["completion_ids"])
    responses = torch.zeros((G, length), dtype=torch.long)
    response_mask = torch.zeros((G, length), dtype=torch.long)
    for i, (ids, mask) in enumerate(zip(group["completion_ids"], group["env_mask"], strict=True)):
        responses[i, : len(ids)] = torch.tensor(ids)
        response_mask[i, : len(mask)] = torch.tensor(mask)

    def batch(with_env_id: bool) -> DataProto:
        non_tensors = {"uid": np.array(["ws"] * G, dtype=object),
                       EPISODE_FIELD: np.array([json.dumps(e) for e in group[EPISODE_FIELD]], dtype=object)}
        if with_env_id:
            non_tensors[ENV_ID_FIELD] = np.array([WEBSHOP] * G, dtype=object)
        return DataProto.from_dict(tensors={"responses": responses.clone(), "response_mask": response_mask.clone(),
                                            "token_level_rewards": torch.zeros((G, length))}, non_tensors=non_tensors)

    out: dict[str, Any] = {"returns": [e.env_return for e in episodes], "successes": [e.success for e in episodes]}
    for name in ("grpo", "trca"):
        by_rule = {rule: torch.as_tensor(completion_advantages(resolve_estimator(name, outcome=rule), episodes, G,
                                                               length)[0], dtype=torch.float32)
                   for rule in ("success", "return")}
        got = compute_advantage(batch(True), adv_estimator=verl_name(name), config=AlgoConfig()).batch["advantages"]
        bare = compute_advantage(batch(False), adv_estimator=verl_name(name), config=AlgoConfig()).batch["advantages"]
        out[name] = {"equals_success_rule": bool(torch.equal(got, by_rule["success"])),
                     "rules_differ": not torch.equal(by_rule["success"], by_rule["return"]),
                     "without_env_id_equals_return_rule": bool(torch.equal(bare, by_rule["return"])),
                     "benchmark_outcome": get_spec(WEBSHOP).outcome}
    return out


def main(tokenizer_dir: str) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    t0 = time.perf_counter()
    groups = [play(tokenizer, 11, 5), play(tokenizer, 3, 2)]
    play_s = time.perf_counter() - t0
    # rows of the two groups interleaved: g0r0, g1r0, g0r1, g1r1, ...
    rows = [(g, k) for k in range(G) for g in range(len(groups))]
    completions = [groups[g]["completion_ids"][k] for g, k in rows]
    masks = [groups[g]["env_mask"][k] for g, k in rows]
    episodes = [groups[g][EPISODE_FIELD][k] for g, k in rows]
    length = max(len(c) for c in completions)
    responses = torch.zeros((len(rows), length), dtype=torch.long)
    response_mask = torch.zeros((len(rows), length), dtype=torch.long)
    token_level_rewards = torch.zeros((len(rows), length), dtype=torch.float32)
    for i, (ids, mask, episode) in enumerate(zip(completions, masks, episodes, strict=True)):
        responses[i, : len(ids)] = torch.tensor(ids)
        response_mask[i, : len(mask)] = torch.tensor(mask)
        token_level_rewards[i, len(ids) - 1] = float(Episode.from_dict(episode).env_return)
    uids = [str(uuid.uuid4()) for _ in groups]

    def batch(with_episodes: bool = True) -> DataProto:
        non_tensors = {"uid": np.array([uids[g] for g, _ in rows], dtype=object)}
        if with_episodes:
            non_tensors[EPISODE_FIELD] = np.array([json.dumps(e) for e in episodes], dtype=object)
        return DataProto.from_dict(tensors={"responses": responses.clone(), "response_mask": response_mask.clone(),
                                            "token_level_rewards": token_level_rewards.clone()},
                                   non_tensors=non_tensors)

    results: dict[str, Any] = {}
    for name in NAMES:
        out = compute_advantage(batch(), adv_estimator=verl_name(name), config=AlgoConfig())
        expected = torch.zeros((len(rows), length), dtype=torch.float32)
        placed = torch.zeros((len(rows), length), dtype=torch.bool)
        for g, group in enumerate(groups):  # rubricgym's own values, group by group in its own order
            values, mask = completion_advantages(name, [Episode.from_dict(e) for e in group[EPISODE_FIELD]], G, length)
            for k in range(G):
                expected[rows.index((g, k))] = torch.as_tensor(values[k], dtype=torch.float32)
                placed[rows.index((g, k))] = torch.as_tensor(mask[k])
        got = out.batch["advantages"]
        action = torch.zeros_like(placed)
        for i, e in enumerate(episodes):
            for s in Episode.from_dict(e).steps:
                if s.action is not None:
                    action[i, s.action[0]: s.action[1]] = True
        results[name] = {
            "equal": bool(torch.equal(got, expected)),
            "returns_equal": bool(torch.equal(out.batch["returns"], got)),
            "max_abs_diff": float((got - expected).abs().max()),
            "nonzero_tokens": int((got != 0).sum()),
            "distinct_values": len({round(float(v), 6) for v in got[got != 0]}),
            "only_action_tokens": bool(not got[~action].any()),
            "inside_response_mask": bool(not got[response_mask == 0].any()),
            "shape": list(got.shape),
        }
    try:
        compute_advantage(batch(with_episodes=False), adv_estimator=verl_name("trca"), config=AlgoConfig())
        missing = "no error"
    except ValueError as exc:
        missing = str(exc)
    try:
        register_estimators(["draco"])
        draco = "no error"
    except ValueError as exc:
        draco = str(exc)
    webshop = webshop_outcome(tokenizer)
    print(json.dumps({
        "results": results, "webshop_outcome": webshop, "rows": len(rows), "length": length, "missing_field_error": missing,
        "draco_without_judge": draco, "draco_registered": verl_name("draco") in ADV_ESTIMATOR_REGISTRY,
        "successes": [Episode.from_dict(e).success for e in episodes],
        "steps": [len(Episode.from_dict(e).steps) for e in episodes],
        "seconds": {"verl_import": round(verl_import_s, 1), "play": round(play_s, 1),
                    "total": round(time.perf_counter() - started, 1)},
    }))


if __name__ == "__main__":
    main(sys.argv[1])
