"""ALFWorld step speed: raw alfworld/TextWorld env vs ``RubricEnv`` on the same games.

Both sides play the same games with the same command sequences: the planner's plan, and
(in the "mixed" sequence) the plan with inadmissible and malformed commands interleaved.
Raw = ``textworld.start`` with alfworld's ``AlfredDemangler``/``AlfredInfos`` (what the
adapter uses); wrapped = ``gym.make("ALFWorld-Rubric-v0", reward="none")`` with
``<action>`` responses, facts, transitions and trajectory included. Rounds alternate between
the two so machine load hits both alike. Games are loaded before timing on both sides.

    python benchmarks/alfworld_step_speed.py [--games 6] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

import gymnasium as gym

import rubricgym  # noqa: F401
from rubricgym.adapters.alfworld.adapter import _start
from rubricgym.adapters.alfworld.games import BUNDLED_ROOT

JUNK = ["go to the moon", "take everything", "<junk>", "open fridge"]


def sequences(env: gym.Env, task_ids: list[str], mixed: bool) -> dict[str, list[str]]:
    out = {}
    for task_id in task_ids:
        env.reset(seed=0, options={"task_id": task_id})
        plan = env.unwrapped.adapter.expert_plan()
        if mixed:
            plan = [c for i, cmd in enumerate(plan) for c in ([JUNK[i % len(JUNK)], cmd] if i % 2 else [cmd])]
        out[task_id] = plan
    return out


def run_raw(engines: dict, seqs: dict[str, list[str]]) -> tuple[float, int]:
    spent, steps = 0.0, 0
    for task_id, commands in seqs.items():
        env = engines[task_id]
        env.reset()
        for command in commands:
            t0 = time.perf_counter()
            env.step(command)
            spent += time.perf_counter() - t0
            steps += 1
    return spent, steps


def run_wrapped(env: gym.Env, seqs: dict[str, list[str]]) -> tuple[float, int]:
    spent, steps = 0.0, 0
    for task_id, commands in seqs.items():
        env.reset(seed=0, options={"task_id": task_id})
        for command in commands:
            response = f"<think>next</think><action>{command}</action>"
            t0 = time.perf_counter()
            env.step(response)
            spent += time.perf_counter() - t0
            steps += 1
    return spent, steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="profile one wrapped round (where the time goes)")
    args = ap.parse_args(argv)

    env = gym.make("ALFWorld-Rubric-v0", reward="none", data_path=BUNDLED_ROOT, max_steps=1000)
    adapter = env.unwrapped.adapter
    task_ids = list(adapter.task_ids())[: args.games]
    engines = {t: _start(adapter.game_file(t), shuffle=False) for t in task_ids}
    print(f"ALFWorld step speed: {len(task_ids)} bundled games, {args.rounds} rounds per side (alternating)")
    for label, mixed in (("expert plan (all admissible)", False), ("plan + invalid commands", True)):
        seqs = sequences(env, task_ids, mixed)
        for fast in ((True, False) if mixed else (True,)):
            adapter.fast_invalid = fast
            raw_t, wrap_t, n = [], [], 0
            run_raw(engines, seqs), run_wrapped(env, seqs)  # warm-up
            for _ in range(args.rounds):
                t, n = run_raw(engines, seqs)
                raw_t.append(t)
                t, n = run_wrapped(env, seqs)
                wrap_t.append(t)
            raw, wrapped = statistics.median(raw_t), statistics.median(wrap_t)
            tag = label + ("" if not mixed else f", fast_invalid={fast}")
            print(f"\n[{tag}] {n} steps per round")
            print(f"  raw alfworld/TextWorld : {n / raw:8.1f} steps/s  ({1e3 * raw / n:6.2f} ms/step)")
            print(f"  RubricEnv              : {n / wrapped:8.1f} steps/s  ({1e3 * wrapped / n:6.2f} ms/step)")
            print(f"  overhead               : {100 * (wrapped / raw - 1):+7.1f} %  (target < +10 %)")
    if args.profile:
        adapter.fast_invalid = True
        seqs = sequences(env, task_ids, False)
        prof = cProfile.Profile()
        prof.enable()
        run_wrapped(env, seqs)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(
            r"rubricgym|adapters|textworld/envs/pddl/pddl.py")
        print(buf.getvalue()[:6000])
    for e in engines.values():
        e.close()
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
