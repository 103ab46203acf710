"""TRCA speed, as ratios measured in one run (targets in brackets):

1. operator judgments per second on precomputed ALFWorld facts, one core   [>= 100,000 /s]
2. TRCAReward overhead over the raw ALFWorld step it wraps                   [< 5 %]
3. group credit for 8 rollouts x 25 steps vs one 25-step rollout's env time  [< 1 %]

    .venv/bin/python benchmarks/trca_throughput.py [--games N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import gymnasium as gym
import numpy as np

import rubricgym  # noqa: F401
from rubricgym.credit.trca import RolloutSignals, trca_group_advantages
from rubricgym.operator_libraries import library_path
from rubricgym.trca import TRCAReward, load_library


class TimedStep(gym.Wrapper):
    """Times the inner env's step, so the wrapper's own share is total minus inner."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.seconds = 0.0

    def step(self, action):
        t = time.perf_counter()
        out = self.env.step(action)
        self.seconds += time.perf_counter() - t
        return out


def collect(games: int) -> tuple[list, list, float, float, int]:
    """Play expert walkthroughs through TRCAReward(TimedStep(RubricEnv)); returns facts, bindings,
    total wrapped step time, and the inner (raw ALFWorld) step time."""
    raw = gym.make("ALFWorld-Rubric-v0", reward="none").unwrapped
    timed = TimedStep(raw)
    env = TRCAReward(timed, benchmark="ALFWorld")
    facts, bindings, total, steps = [], [], 0.0, 0
    for task in raw.adapter.task_ids()[:games]:
        _, info = env.reset(seed=0, options={"task_id": task})
        plan = raw.adapter.expert_plan()
        for cmd in plan + ["look", "inventory", "look", "fly away"]:  # a few non-expert steps too
            t = time.perf_counter()
            _, _, term, trunc, info = env.step(f"<action>{cmd}</action>")
            total += time.perf_counter() - t
            steps += 1
            facts.append(info["transition"].facts)
            bindings.append(info["binding"] if "binding" in info else raw.adapter.binding())
            if term or trunc:
                break
    env.close()
    return facts, bindings, total, timed.seconds, steps


def judgments_per_second(facts, bindings, repeat: int) -> tuple[float, float, int]:
    """Best of ``repeat`` passes, per wall second and per CPU second of this process (the
    one-core figure when other processes compete for the cores)."""
    lib = load_library(library_path("ALFWorld"))
    judge = lib.episode(bindings[0])
    prior = np.zeros(lib.num_operators)
    best_wall = best_cpu = 0.0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        for f in facts:
            judge.judge(f, prior)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        n = len(facts) * lib.num_operators
        best_wall, best_cpu = max(best_wall, n / wall), max(best_cpu, n / max(cpu, 1e-9))
    return best_wall, best_cpu, lib.num_operators


def group_credit_seconds(repeat: int) -> float:
    rng = np.random.default_rng(0)
    group = []
    for i in range(8):
        env = np.zeros(25)
        env[-1] = float(i % 2)
        group.append(RolloutSignals(r_f=rng.normal(size=25), r_b=rng.random(25), env_rewards=env,
                                    context_keys=[f"ctx{rng.integers(6)}" for _ in range(25)]))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        trca_group_advantages(group)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    facts, bindings, wrapped_s, inner_s, steps = collect(args.games)
    jps_wall, jps, n_ops = judgments_per_second(facts * 20, bindings, args.repeat)
    raw_step = inner_s / steps
    overhead = (wrapped_s - inner_s) / inner_s
    credit = group_credit_seconds(args.repeat * 10)
    rollout = 25 * raw_step
    result = {
        "operators": n_ops,
        "judgments_per_cpu_second": round(jps),
        "judgments_per_wall_second": round(jps_wall),
        "judgments_target": 100_000,
        "raw_alfworld_step_ms": round(raw_step * 1e3, 3),
        "trca_overhead_per_step_ms": round((wrapped_s - inner_s) / steps * 1e3, 3),
        "trca_wrapper_overhead_ratio": round(overhead, 5),
        "overhead_target": 0.05,
        "group_credit_8x25_ms": round(credit * 1e3, 3),
        "one_rollout_25_steps_ms": round(rollout * 1e3, 1),
        "group_credit_ratio": round(credit / rollout, 6),
        "credit_target": 0.01,
        "steps_measured": steps,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpu_count": os.cpu_count(),
    }
    ok = (jps >= 100_000, overhead < 0.05, credit / rollout < 0.01)
    for key, value in result.items():
        print(f"{key:32} {value}")
    print("targets met:", dict(zip(("judgments", "overhead", "credit"), ok)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
