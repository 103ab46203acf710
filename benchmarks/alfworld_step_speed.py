"""ALFWorld step speed: what ``RubricEnv`` adds on top of the engine step it wraps.

Like for like: both sides play the same games with the same commands on engines made by the
same function (``textworld.start`` with alfworld's ``AlfredDemangler``/``AlfredInfos``, as the
adapter makes them), reset under the same seeded global random, and every command reaches
the engine on both sides (``fast_invalid=False``). The raw side is one such engine per game;
the wrapped side is ``gym.make("ALFWorld-Rubric-v0", reward="none")`` fed
``<think>..</think><action>..</action>`` responses (parsing, facts, transition, trajectory
included) on the adapter's own engine for that game. Steps alternate one by one between the
two sides, and each is timed in CPU seconds of this thread (time other processes take from
it on a loaded machine is not counted; wall clock is reported too) with the garbage
collector paused during a round (a collection lands in whichever side allocates next, and
the engines' parsed grammars make it long). The figure is rubricgym's overhead: the median
of the per-step differences (wrapped minus raw, same command, same state) over the median
raw step [target < 2 %]; the ratio of the totals minus one is reported too.

Separately, ``fast_invalid=True`` (the default: commands that are not admissible are answered
without the engine, exactly as it would) is reported as a speed-up on a sequence with
invalid commands, not as overhead.

    python benchmarks/alfworld_step_speed.py [--games 6] [--rounds 3] [--json OUT] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import statistics
import time

import gymnasium as gym

import rubricgym  # noqa: F401
from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT, reset_seed, seeded_global_random, start_engine
from rubricgym.atomic_files import atomic_write_json

JUNK = ["go to the moon", "take everything", "xyzzy", "open fridge"]  # parse, so both sides call the engine
SEED = 0


def sequences(env: gym.Env, task_ids: list[str], mixed: bool) -> dict[str, list[str]]:
    out = {}
    for task_id in task_ids:
        env.reset(seed=SEED, options={"task_id": task_id})
        plan = env.unwrapped.adapter.expert_plan()
        if mixed:
            plan = [c for i, cmd in enumerate(plan) for c in ([JUNK[i % len(JUNK)], cmd] if i % 2 else [cmd])]
        out[task_id] = plan
    return out


def reset_raw(engine, task_id: str) -> None:
    """Reset as the adapter does (same seeded global random)."""
    with seeded_global_random(reset_seed(task_id, SEED)):
        engine.reset()


def paired_round(env: gym.Env, engines: dict, seqs: dict[str, list[str]]) -> dict[str, float]:
    """One round: per game, reset both sides, then step them alternately with the same
    commands. Returns CPU seconds (this thread's: preemption by other processes is not
    counted) and wall seconds of each side, and the number of steps."""
    out = {"raw_cpu": 0.0, "wrapped_cpu": 0.0, "raw_wall": 0.0, "wrapped_wall": 0.0, "steps": 0,
           "pairs": []}
    cpu, wall = time.thread_time, time.perf_counter
    for task_id, commands in seqs.items():
        engine = engines[task_id]
        reset_raw(engine, task_id)
        env.reset(seed=SEED, options={"task_id": task_id})
        for command in commands:
            response = f"<think>next</think><action>{command}</action>"
            c0, w0 = cpu(), wall()
            engine.step(command)
            c1, w1 = cpu(), wall()
            env.step(response)
            c2, w2 = cpu(), wall()
            out["raw_cpu"] += c1 - c0
            out["wrapped_cpu"] += c2 - c1
            out["raw_wall"] += w1 - w0
            out["wrapped_wall"] += w2 - w1
            out["steps"] += 1
            out["pairs"].append((c1 - c0, c2 - c1))
    return out


def wrapped_round(env: gym.Env, seqs: dict[str, list[str]]) -> tuple[float, int]:
    """CPU seconds of the wrapped steps alone."""
    spent, steps = 0.0, 0
    for task_id, commands in seqs.items():
        env.reset(seed=SEED, options={"task_id": task_id})
        for command in commands:
            t0 = time.thread_time()
            env.step(f"<think>next</think><action>{command}</action>")
            spent += time.thread_time() - t0
            steps += 1
    return spent, steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--profile", action="store_true", help="profile one wrapped round (where the time goes)")
    args = ap.parse_args(argv)

    env = gym.make("ALFWorld-Rubric-v0", reward="none", data_path=BUNDLED_ROOT, max_steps=1000)
    adapter = env.unwrapped.adapter
    task_ids = list(adapter.task_ids())[: args.games]
    engines = {t: start_engine(adapter.game_file(t), shuffle=False) for t in task_ids}
    result: dict = {"games": len(task_ids), "rounds": args.rounds, "overhead_target": 0.02, "clock": "thread CPU time",
                    "sequences": {}}
    print(f"ALFWorld step speed: {len(task_ids)} bundled games, {args.rounds} paired rounds per sequence")
    adapter.fast_invalid = False  # like for like: every command reaches the engine on both sides
    for label, mixed in (("expert_plan", False), ("plan_with_invalid_commands", True)):
        seqs = sequences(env, task_ids, mixed)
        paired_round(env, engines, seqs)  # warm-up
        rounds = []
        for _ in range(args.rounds):
            gc.collect()
            gc.disable()  # a collection would land in whichever side happens to allocate next
            try:
                rounds.append(paired_round(env, engines, seqs))
            finally:
                gc.enable()
        total = {k: sum(r[k] for r in rounds) for k in rounds[0] if k != "pairs"}
        pairs = [p for r in rounds for p in r["pairs"]]
        # robust to the odd step that a loaded machine slows on one side: the median paired
        # difference over the median raw step
        robust = statistics.median(w - r for r, w in pairs) / statistics.median(r for r, _ in pairs)
        n = total["steps"]
        entry = {
            "steps": n,
            "raw_cpu_ms_per_step": round(1e3 * total["raw_cpu"] / n, 3),
            "rubricenv_cpu_ms_per_step": round(1e3 * total["wrapped_cpu"] / n, 3),
            "overhead_cpu_ms_per_step": round(1e3 * (total["wrapped_cpu"] - total["raw_cpu"]) / n, 3),
            "overhead": round(robust, 4),
            "overhead_total": round(total["wrapped_cpu"] / total["raw_cpu"] - 1, 4),
            "overhead_per_round": [round(r["wrapped_cpu"] / r["raw_cpu"] - 1, 4) for r in rounds],
            "raw_wall_ms_per_step": round(1e3 * total["raw_wall"] / n, 3),
            "rubricenv_wall_ms_per_step": round(1e3 * total["wrapped_wall"] / n, 3),
            "overhead_wall": round(total["wrapped_wall"] / total["raw_wall"] - 1, 4),
        }
        result["sequences"][label] = entry
        print(f"\n[{label}] {n} steps in {args.rounds} rounds, fast_invalid=False on both sides (CPU time)")
        print(f"  raw alfworld/TextWorld : {entry['raw_cpu_ms_per_step']:8.2f} ms/step")
        print(f"  RubricEnv              : {entry['rubricenv_cpu_ms_per_step']:8.2f} ms/step")
        print(f"  overhead               : {100 * entry['overhead']:+7.2f} %  (median paired step; target < +2 %)")
        print(f"  overhead of the totals : {100 * entry['overhead_total']:+7.2f} %  (wall clock: "
              f"{100 * entry['overhead_wall']:+.2f} %)")
    # the adapter's shortcut for commands that are not admissible: a speed-up, not overhead
    seqs = sequences(env, task_ids, True)
    slow = sum(wrapped_round(env, seqs)[0] for _ in range(args.rounds))
    adapter.fast_invalid = True
    fast = sum(wrapped_round(env, seqs)[0] for _ in range(args.rounds))
    result["fast_invalid_speedup_on_plan_with_invalid_commands"] = round(slow / fast, 3)
    print(f"\nfast_invalid=True on the sequence with invalid commands: x{slow / fast:.2f} faster than False")
    worst = max(e["overhead"] for e in result["sequences"].values())
    result["target_met"] = worst < 0.02
    result["load_average_1min"] = round(os.getloadavg()[0], 2)
    result["cpu_count"] = os.cpu_count()
    if args.profile:
        seqs = sequences(env, task_ids, False)
        prof = cProfile.Profile()
        prof.enable()
        wrapped_round(env, seqs)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(
            r"rubricgym|adapters|textworld/envs/pddl/pddl.py")
        print(buf.getvalue()[:6000])
    for e in engines.values():
        e.close()
    env.close()
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
