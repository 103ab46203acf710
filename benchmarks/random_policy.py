"""Chance level on a benchmark's tasks: a policy that picks uniformly among the admissible actions.

    .venv/bin/python benchmarks/random_policy.py --env ALFWorld-Rubric-Eval-v0 --budgets 10,20,30 \\
        --samples 3 --exclude-verbs look,inventory,examine,help \\
        --json benchmarks/results/alfworld_random_policy.json

What a held-out success of a trained policy is to be read against: a policy that knows nothing
but the admissible list. Every task is played ``--samples`` times (sample ``k`` resets with seed
``k`` and draws its actions from its own seeded stream) for the largest budget; the step at which
an episode was won answers every smaller budget too (the policy does not look at the budget).
Per budget: successes, episodes and the Wilson 95% interval. ``--exclude-verbs`` drops actions
whose first word is listed (ALFWorld's ``look``/``inventory``/``examine``/``help`` change nothing),
unless nothing else is admissible.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import gymnasium as gym

import rubricgym  # noqa: F401  (registers the benchmarks' env ids)
from rubricgym.atomic_files import atomic_write_json
from rubricgym.registration import check_env_id
from rubricgym.trainers.statistics import wilson_interval


def choose(admissible: list[str], excluded: frozenset[str], rng: random.Random) -> str:
    """A uniform draw over the admissible actions whose first word is not excluded (over all of
    them when that leaves none)."""
    allowed = [a for a in admissible if (a.split() or [""])[0] not in excluded]
    return rng.choice(allowed or admissible)


def play(env: gym.Env, task_id: str, sample: int, budget: int, excluded: frozenset[str]) -> int | None:
    """The number of steps after which the episode was won; None if it was not within ``budget``."""
    grammar = env.unwrapped.adapter.grammar
    rng = random.Random(f"{task_id}/{sample}")
    _, info = env.reset(seed=sample, options={"task_id": task_id})
    for step in range(1, budget + 1):
        admissible = list(info.get("admissible_actions") or [])
        if not admissible:
            raise ValueError(f"{task_id}: the env lists no admissible actions; a random policy needs them")
        _, _, terminated, truncated, info = env.step(grammar.render(choose(admissible, excluded, rng)))
        if info.get("environment_failure"):  # not the policy's loss: no number rather than a wrong one
            raise RuntimeError(f"{task_id} (sample {sample}): {info.get('error')}; chance level not measured")
        if terminated or truncated:
            outcome = info.get("outcome")
            return step if outcome is not None and outcome.success else None
    return None


def measure(env_id: str, budgets: list[int], samples: int, excluded: frozenset[str],
            tasks: int | None = None) -> dict[str, Any]:
    """Success at each budget over every (task, sample), with the per-task winning steps."""
    longest = max(budgets)  # one play per (task, sample) answers every shorter budget
    env = gym.make(check_env_id(env_id), reward="none", max_steps=longest)
    try:
        task_ids = list(env.unwrapped.adapter.task_ids())[:tasks]
        won_at = {t: [play(env, t, k, longest, excluded) for k in range(samples)] for t in task_ids}
    finally:
        env.close()
    episodes = len(task_ids) * samples
    per_budget = {}
    for budget in budgets:
        wins = sum(1 for steps in won_at.values() for s in steps if s is not None and s <= budget)
        low, high = wilson_interval(wins, episodes)
        per_budget[str(budget)] = {"successes": wins, "episodes": episodes, "success_rate": wins / episodes,
                                   "wilson95": [low, high]}
    return {"env": env_id, "samples_per_task": samples, "excluded_verbs": sorted(excluded),
            "budgets": per_budget, "won_at_step": won_at}


def _budgets(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("budgets are positive step counts, e.g. 10,20,30")
    return sorted(set(values))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="ALFWorld-Rubric-Eval-v0", help="a registered env id")
    ap.add_argument("--budgets", type=_budgets, default=[10, 20, 30], help="step budgets (comma-separated)")
    ap.add_argument("--samples", type=int, default=3, help="episodes per task")
    ap.add_argument("--tasks", type=int, default=None, help="only the first N tasks (default: all)")
    ap.add_argument("--exclude-verbs", default="", help="comma-separated first words never chosen")
    ap.add_argument("--json", type=Path, default=None, help="write the result here (default: print it)")
    args = ap.parse_args(argv)
    if args.samples < 1:
        ap.error("--samples must be at least 1")
    excluded = frozenset(v.strip() for v in args.exclude_verbs.split(",") if v.strip())
    report = {"benchmark": "random_policy", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
              **measure(args.env, args.budgets, args.samples, excluded, args.tasks)}
    if not args.json:
        print(json.dumps(report, indent=2))
        return 0
    atomic_write_json(args.json, report)  # never half a file
    for budget, result in report["budgets"].items():
        low, high = result["wilson95"]
        print(f"{budget:>4} steps: {result['successes']}/{result['episodes']} won "
              f"({result['success_rate']:.1%}, Wilson 95% {low:.1%}-{high:.1%})")
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
