"""TRCA speed, as ratios measured in one run (targets in brackets):

1. operator judgments per CPU second on DISTINCT real ALFWorld facts, one core   [>= 1,000,000 /s]
   (every bundled game's expert walkthrough, replayed with object
   numbers shifted so no facts repeat; one EpisodeJudge per episode, its set-up counted;
   no result caching), against the straightforward path (a fresh nested context and
   every condition alone per step) on the same facts, whose judgments must be identical
2. TRCAReward overhead over the raw ALFWorld step it wraps                       [< 5 %]
3. group credit for 8 rollouts x 25 steps vs one 25-step rollout's env time      [< 1 %]

Also reported: the CEL bindings' floor on the same steps -- per step only what no judge can
skip (each changed fact value converted by ``add_variable``, the context rebuilt and the one
batched program run: no Python bookkeeping, no change detection, no decoding). It bounds
what any judge built on these bindings can reach on this stream, and splits it into
conversion, and rebuild plus evaluation.

    .venv/bin/python benchmarks/trca_throughput.py [--games N] [--replays R] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time

import gymnasium as gym
import numpy as np

import rubricgym  # noqa: F401
from rubricgym.atomic_files import atomic_write_json
from rubricgym.estimators import group_step_advantages
from rubricgym.credit.trca import RolloutSignals
from rubricgym.registration import get_spec, operator_library
from rubricgym.trca import TRCAReward, load_library
from rubricgym.trca.operators import reference_judgments


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


def collect(games: int) -> tuple[list[tuple[dict, list[dict]]], float, float, int]:
    """Play expert walkthroughs through TRCAReward(TimedStep(RubricEnv)); returns the episodes
    (binding, facts as plain dicts), total wrapped step time, and the inner (raw) step time."""
    raw = gym.make("ALFWorld-Rubric-v0", reward="none").unwrapped
    timed = TimedStep(raw)
    env = TRCAReward(timed, context=get_spec("ALFWorld").reward_context())
    episodes, total, steps = [], 0.0, 0
    for task in raw.adapter.task_ids()[:games]:
        _, info = env.reset(seed=0, options={"task_id": task})
        binding = raw.adapter.binding().model_dump(mode="json")
        plan = raw.adapter.expert_plan()
        facts = []
        for cmd in plan + ["look", "inventory", "look", "fly away"]:  # non-expert steps if the plan fails
            t = time.perf_counter()
            _, _, term, trunc, info = env.step(f"<action>{cmd}</action>")
            total += time.perf_counter() - t
            steps += 1
            facts.append(info["transition"].facts.model_dump(mode="json"))
            if term or trunc:
                break
        episodes.append((binding, facts))
    env.close()
    return episodes, total, timed.seconds, steps


_NUMBER = re.compile(r" (\d+)$")


def shifted(value, k: int):
    """``value`` with every object number shifted by ``k`` ("apple 1" -> "apple 8")."""
    if isinstance(value, str):
        return _NUMBER.sub(lambda m: f" {int(m.group(1)) + k}", value)
    if isinstance(value, list):
        return [shifted(v, k) for v in value]
    return value


def distinct_episodes(episodes, replays: int, facts_model, read_fields) -> tuple[list[tuple[dict, list]], float]:
    """``replays`` copies of every episode, object numbers shifted by 1000 per copy, as facts
    models. Returns them and the share of steps whose READ fields (what the conditions
    see) occur once in the whole stream (the rest repeat only in fields like booleans)."""
    out, counts = [], {}
    for r in range(replays):
        for binding, facts in episodes:
            steps = [facts_model.model_validate({k: shifted(v, 1000 * r) for k, v in f.items()}) for f in facts]
            for f in steps:
                key = json.dumps([getattr(f, k) for k in read_fields])
                counts[key] = counts.get(key, 0) + 1
            out.append((binding, steps))
    total = sum(counts.values())
    return out, sum(1 for n in counts.values() if n == 1) / total


def judgments_per_second(lib, episodes, repeat: int) -> tuple[float, float]:
    """Best of ``repeat`` passes, per wall second and per CPU second of this process (the
    one-core figure when other processes compete for the cores). Each episode gets a fresh
    ``EpisodeJudge`` (its set-up is counted); the coverage before each step (carried from
    the episode's earlier judgments) is worked out once, outside the timed passes."""
    priors = []
    for binding, facts in episodes:
        judge, prior, mine = lib.episode(binding), np.zeros(lib.num_operators), []
        for f in facts:
            mine.append(prior)
            prior = np.maximum(prior, judge.judge(f, prior) * lib.coverable)
        priors.append(mine)
    work = [(binding, list(zip(facts, p, strict=True))) for (binding, facts), p in zip(episodes, priors, strict=True)]
    n = sum(len(f) for _, f in episodes) * lib.num_operators
    best_wall = best_cpu = 0.0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        for binding, steps in work:
            judge = lib.episode(binding)
            for f, prior in steps:
                judge.judge(f, prior)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        best_wall, best_cpu = max(best_wall, n / wall), max(best_cpu, n / max(cpu, 1e-9))
    return best_wall, best_cpu


def binding_floor(lib, episodes, repeat: int) -> dict[str, float]:
    """Judgments per CPU second if a step cost only the bindings' unavoidable work: the
    changed fact values (plain, found beforehand) added to one reused context, then the
    batched program run once. Best of ``repeat``; the conversion alone is timed too."""
    import cel

    from rubricgym.trca.operators import fact_values

    batch = lib.batch(range(lib.num_operators))
    program = batch.programs[0][0]
    steps, last = [], None
    for binding, facts in episodes:
        bind = {v: binding.get(f) for v, f in zip(lib.binding_variables, lib.binding_fields, strict=True)}
        for f in facts:
            values = fact_values(f, lib.fact_fields)
            changed = [(name, v) for k, (name, v) in enumerate(zip(lib.fact_variables, values, strict=True))
                       if last is None or v != last[k]]
            steps.append((bind, changed))
            last = values
    context = cel.Context({**dict.fromkeys(lib.fact_variables), **dict.fromkeys(lib.coverage_variables, False),
                           **steps[0][0]})
    n = len(steps) * lib.num_operators
    best_all = best_convert = 0.0
    for _ in range(repeat):
        add = context.add_variable
        c = time.process_time()
        for _, changed in steps:
            for name, value in changed:
                add(name, value)
        convert = time.process_time() - c
        c = time.process_time()
        for _, changed in steps:
            for name, value in changed:
                add(name, value)
            program.execute(context)
        total = time.process_time() - c
        best_all, best_convert = max(best_all, n / total), max(best_convert, n / convert)
    changed_per_step = sum(len(c) for _, c in steps) / len(steps)
    return {"judgments_per_cpu_second": best_all, "conversion_us_per_step": 1e6 * lib.num_operators / best_convert,
            "step_us": 1e6 * lib.num_operators / best_all, "changed_values_per_step": changed_per_step}


def reference_per_second(lib, episodes, repeat: int) -> tuple[float, int]:
    """The straightforward path on the same steps (best of ``repeat``), and how many steps'
    judgments differ from the fast path (must be 0)."""
    best, differ = 0.0, 0
    for r in range(repeat):
        c = time.process_time()
        rows = []
        for binding, facts in episodes:
            prior = np.zeros(lib.num_operators)
            for f in facts:
                row, _ = reference_judgments(lib, f, binding, prior)
                rows.append(row)
                prior = np.maximum(prior, row * lib.coverable)
        cpu = time.process_time() - c
        best = max(best, len(rows) * lib.num_operators / max(cpu, 1e-9))
        if r == 0:
            fast = []
            for binding, facts in episodes:
                judge, prior = lib.episode(binding), np.zeros(lib.num_operators)
                for f in facts:
                    fast.append(judge.judge(f, prior))
                    prior = np.maximum(prior, fast[-1] * lib.coverable)
            differ = sum(not np.array_equal(a, b) for a, b in zip(rows, fast, strict=True))
    return best, differ


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
        group_step_advantages("trca", group)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=100, help="bundled games to play (default: all)")
    parser.add_argument("--replays", type=int, default=20, help="copies of each episode, object numbers shifted")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()

    from rubricgym.adapters.alfworld.facts import ALFWorldFacts

    recorded, wrapped_s, inner_s, steps = collect(args.games)
    lib = load_library(operator_library("ALFWorld"))
    episodes, unique_share = distinct_episodes(recorded, args.replays, ALFWorldFacts, lib.fact_fields)
    jps_wall, jps = judgments_per_second(lib, episodes, args.repeat)
    reference = episodes[: len(recorded)]  # one replay is enough for the slow path
    ref_jps, differ = reference_per_second(lib, reference, max(1, args.repeat // 3))
    floor = binding_floor(lib, episodes, args.repeat)
    raw_step = inner_s / steps
    overhead = (wrapped_s - inner_s) / inner_s
    credit = group_credit_seconds(args.repeat * 30)
    rollout = 25 * raw_step
    n_steps = sum(len(f) for _, f in episodes)
    result = {
        "operators": lib.num_operators,
        "episodes_judged": len(episodes),
        "steps_judged": n_steps,
        "steps_with_unique_read_facts": round(unique_share, 4),
        "judgments_per_cpu_second": round(jps),
        "judgments_per_wall_second": round(jps_wall),
        "judgments_target": 1_000_000,
        "binding_floor_judgments_per_cpu_second": round(floor["judgments_per_cpu_second"]),
        "binding_floor_us_per_step": round(floor["step_us"], 2),
        "binding_floor_conversion_us_per_step": round(floor["conversion_us_per_step"], 2),
        "changed_fact_values_per_step": round(floor["changed_values_per_step"], 2),
        "judge_share_of_binding_floor": round(jps / floor["judgments_per_cpu_second"], 3),
        "straightforward_judgments_per_cpu_second": round(ref_jps),
        "speedup_over_straightforward": round(jps / max(ref_jps, 1e-9), 1),
        "steps_judged_differently": differ,
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
    ok = {"judgments": jps >= 1_000_000, "identical": differ == 0, "overhead": overhead < 0.05,
          "credit": credit / rollout < 0.01}
    result["targets_met"] = ok
    for key, value in result.items():
        print(f"{key:42} {value}")
    if args.json:
        atomic_write_json(args.json, result)
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
