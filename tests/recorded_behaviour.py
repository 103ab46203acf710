"""A recorded behaviour fixture: fixed responses played through ``gym.make`` on three
benchmarks, with everything the reward path produces (step rewards, facts, every reward
record, outcomes) and the per-step advantages of the estimators that need no judge.

``tests/fixtures/recorded_behaviour.json`` was written by this module from the code as it
was before the core clean-up; ``tests/core/test_recorded_behaviour.py`` plays the same
responses again and compares. Regenerate only when a behaviour change is intended, and say
why in the commit: ``python tests/recorded_behaviour.py --write``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import gymnasium as gym

import rubricgym  # noqa: F401  (registers the env ids)
from rubricgym.estimators import group_step_advantages
from rubricgym.demo import scripted_responses

FIXTURE = Path(__file__).parent / "fixtures" / "recorded_behaviour.json"
ESTIMATORS = ("grpo", "trca", "trca_no_rf", "trca_no_rb")
SEED = 3

# One group of three rollouts of one task per benchmark, all from the same initial state:
# the expert plan, the plan with mistakes (no tag, an unknown command, a repeat) and junk.
JUNK = ["I should act now.", "<think>hmm</think><action>look</action>",
        "<think>hmm</think><action>look</action>", "<think>x</think><action></action>",
        "<think>a</think><action>one</action><action>two</action>"]


GROUPS: dict[str, dict[str, Any]] = {
    "ALFWorld": {
        "env_id": "ALFWorld-Rubric-v0",
        "task_id": None,  # the first train game
        "max_steps": 12,
    },
    "WebShop": {
        "env_id": "WebShop-Rubric-v0",
        "task_id": None,  # the first train goal
        "max_steps": 10,
    },
    "TauBench": {
        "env_id": "TauBench-Retail-Rubric-v0",
        "task_id": "0",
        "max_steps": 12,
    },
}


def _responses_for(env: gym.Env, spec: dict[str, Any]) -> list[list[str]]:
    """Three response lists: the expert plan, the plan with mistakes, junk."""
    adapter = env.unwrapped.adapter
    plan = rubricgym.get_spec(adapter.benchmark).load_expert()(adapter)
    return [[adapter.grammar.render(a) for a in plan], scripted_responses(adapter.grammar, plan)[:6], list(JUNK)]


def _plain(value: Any) -> Any:
    """JSON-safe, key-sorted copy (floats kept as floats; NaN/inf as strings)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump(mode="json"))
    return value


def play_group(benchmark: str, responses: list[list[str]] | None = None) -> dict[str, Any]:
    """Play the benchmark's group; ``responses`` from the fixture, or made here (recording)."""
    spec = GROUPS[benchmark]
    env = gym.make(spec["env_id"], max_steps=spec["max_steps"])
    try:
        adapter = env.unwrapped.adapter
        task_id = spec["task_id"] or list(adapter.task_ids())[0]
        rollouts, trajectories = [], []
        if responses is None:
            env.reset(seed=SEED, options={"task_id": task_id})
            responses = _responses_for(env, spec)
        for played in responses:
            obs, info = env.reset(seed=SEED, options={"task_id": task_id})
            steps = []
            for response in played:
                obs, reward, terminated, truncated, info = env.step(response)
                steps.append({"reward": float(reward), "terminated": terminated, "truncated": truncated,
                              "observation": obs, "rubric": _plain(info.get("rubric", {})),
                              "env_reward": float(info["env_reward"]) if "env_reward" in info else None})
                if terminated or truncated:
                    break
            trajectory = env.unwrapped.trajectory.model_copy(deep=True)
            trajectories.append(trajectory)
            rollouts.append({"responses": played, "steps": steps,
                             "trajectory": _plain(trajectory.model_dump(mode="json"))})
        advantages = {name: [_plain([float(v) for v in a]) for a in group_step_advantages(name, trajectories)]
                      for name in ESTIMATORS}
        return {"env_id": spec["env_id"], "task_id": task_id, "seed": SEED, "rollouts": rollouts,
                "advantages": advantages}
    finally:
        env.close()


def record() -> dict[str, Any]:
    return {benchmark: play_group(benchmark) for benchmark in GROUPS}


def replay(stored: dict[str, Any]) -> dict[str, Any]:
    """Play every stored group's responses again with the code as it is now."""
    return {benchmark: play_group(benchmark, [r["responses"] for r in group["rollouts"]])
            for benchmark, group in stored.items()}


def differences(expected: Any, actual: Any, path: str = "$", rel: float = 1e-9) -> list[str]:
    """Every place the two JSON values differ (floats within ``rel``)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{path}.{k}: missing" for k in expected if k not in actual]
        out += [f"{path}.{k}: unexpected" for k in actual if k not in expected]
        for key in expected:
            if key in actual:
                out += differences(expected[key], actual[key], f"{path}.{key}", rel)
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: length {len(expected)} != {len(actual)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in differences(e, a, f"{path}[{i}]", rel)]
    if isinstance(expected, float) or isinstance(actual, float):
        if isinstance(expected, int | float) and isinstance(actual, int | float) and not isinstance(expected, bool):
            if math.isclose(float(expected), float(actual), rel_tol=rel, abs_tol=1e-12):
                return []
    if expected != actual:
        return [f"{path}: {str(expected)[:120]!r} != {str(actual)[:120]!r}"]
    return []


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="record the fixture from the code as it is now")
    args = parser.parse_args()
    if args.write:
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {FIXTURE}")
    else:
        stored = json.loads(FIXTURE.read_text(encoding="utf-8"))
        diffs = differences(stored, json.loads(json.dumps(replay(stored), sort_keys=True)))
        print("\n".join(diffs[:50]) or "identical")
