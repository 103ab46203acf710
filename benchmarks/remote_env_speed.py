"""Remote env speed: what playing a served env (``rubricgym serve-env``, loopback) costs.

1. Added time per step: the same commands on the same games, in-process
   (``gym.make(ENV, reward="none")``) and remote (``rubricgym/Remote-v0`` against a server with
   ``--reward none`` and one worker process), steps alternating one by one. The figure is the
   median remote step minus the median in-process step, as a ratio to the in-process step
   (the engine step plus rubricgym's own ~2 %: see alfworld_step_speed.py). ALFWorld, WebShop.
2. Throughput: ALFWorld episodes per minute (expert plans on a small pool of games) with 1, 4
   and 16 concurrent sessions on one server with as many worker processes as cores; each
   session plays one warm-up episode (its env's first game load) before the clock starts.
   Target on 2 cores: 4 sessions >= 1.5x one.

    python benchmarks/remote_env_speed.py [--json] [--window-s 40]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import rubricgym  # noqa: E402,F401  (registers the env ids)
from remote.conftest import start_server  # noqa: E402  (the tests' real-server launcher)
from rubricgym.servers import tree_cpu_seconds  # noqa: E402  (the server and every process under it)
from rubricgym.atomic_files import atomic_write_json  # noqa: E402

ALF_TASKS = ["look_at_obj_in_light-Pen-None-FloorLamp-330/trial_T00000013_train_00",
             "pick_and_place_simple-SaltShaker-None-DiningTable-24/trial_T00000018_train_00"]
OUT = ROOT / "benchmarks" / "results" / "remote_env_speed.json"


def _wrap(command: str) -> str:
    return f"<think>go</think><action>{command}</action>"


def _plans(env_id: str, kwargs: dict, tasks: list[str], expert) -> dict[str, list[str]]:
    env = gym.make(env_id, reward="none", **kwargs)
    plans = {}
    for task in tasks:
        env.reset(seed=0, options={"task_id": task})
        plans[task] = [_wrap(a) for a in expert(env)]
    env.close()
    return plans


def added_step_time(env_id: str, kwargs: dict, tasks: list[str], expert, rounds: int) -> dict:
    plans = _plans(env_id, kwargs, tasks, expert)
    server = start_server(env_id, "--reward", "none", "--max-sessions", "1", "--workers", "1", kwargs=kwargs)
    try:
        local = gym.make(env_id, reward="none", **kwargs)
        remote = gym.make("rubricgym/Remote-v0", url=server.url, env_id=env_id)
        here, there = [], []
        for r in range(rounds + 1):  # round 0 warms both sides (game loads, caches)
            for task, plan in plans.items():
                local.reset(seed=0, options={"task_id": task})
                remote.reset(seed=0, options={"task_id": task})
                for response in plan:
                    t0 = time.perf_counter()
                    local.step(response)
                    t1 = time.perf_counter()
                    remote.step(response)
                    t2 = time.perf_counter()
                    if r:
                        here.append(t1 - t0)
                        there.append(t2 - t1)
        local.close()
        remote.close()
    finally:
        server.stop()
    local_ms, remote_ms = statistics.median(here) * 1e3, statistics.median(there) * 1e3
    return {"steps": len(here), "in_process_step_ms": round(local_ms, 2), "remote_step_ms": round(remote_ms, 2),
            "added_ms": round(remote_ms - local_ms, 2), "added_over_step": round((remote_ms - local_ms) / local_ms, 3)}


def throughput(kwargs: dict, window_s: float, levels: list[int]) -> dict:
    plans = _plans("ALFWorld-Rubric-v0", kwargs, ALF_TASKS, lambda env: env.unwrapped.adapter.expert_plan())
    workers = os.cpu_count() or 1
    server = start_server("ALFWorld-Rubric-v0", "--reward", "none", "--max-sessions", str(max(levels)),
                          "--workers", str(workers), kwargs=kwargs)
    out: dict[str, float] = {}
    cores: dict[str, float] = {}  # cores the server and its workers got: below N on a machine others load
    try:
        for n in levels:
            envs = [gym.make("rubricgym/Remote-v0", url=server.url, env_id="ALFWorld-Rubric-v0") for _ in range(n)]
            counts = [0] * n
            start = threading.Barrier(n + 1)
            stop_at = [float("inf")]

            def play(k: int) -> None:
                env, task = envs[k], ALF_TASKS[k % len(ALF_TASKS)]

                def episode() -> None:
                    env.reset(seed=k, options={"task_id": task})
                    for response in plans[task]:
                        env.step(response)

                episode()  # warm-up: this session's env loads its game
                start.wait()
                while time.monotonic() < stop_at[0]:
                    episode()
                    if time.monotonic() <= stop_at[0]:
                        counts[k] += 1

            threads = [threading.Thread(target=play, args=(k,)) for k in range(n)]
            for t in threads:
                t.start()
            start.wait()
            t0, cpu0 = time.monotonic(), tree_cpu_seconds(server.proc.pid)
            stop_at[0] = t0 + window_s
            for t in threads:
                t.join()
            cores[str(n)] = round((tree_cpu_seconds(server.proc.pid) - cpu0) / (time.monotonic() - t0), 2)
            out[str(n)] = round(sum(counts) / window_s * 60, 1)
            for env in envs:
                env.close()
    finally:
        server.stop()
    return {"episodes_per_minute": out, "server_cores_busy": cores, "worker_processes": workers, "window_s": window_s,
            "load_average_1min_at_end": round(os.getloadavg()[0], 2),
            "speedup_4_over_1": round(out["4"] / out["1"], 2) if "1" in out and "4" in out else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=40.0)
    args = parser.parse_args()
    from rubricgym.adapters.alfworld.engine import BUNDLED_ROOT
    from rubricgym.adapters.webshop.expert import expert_actions

    alf = {"data_path": str(BUNDLED_ROOT)}
    web = gym.make("WebShop-Rubric-v0", reward="none")
    web_tasks = web.unwrapped.task_ids[:3]
    web.close()
    result = {
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "added_step_time": {
            "ALFWorld": added_step_time("ALFWorld-Rubric-v0", alf, ALF_TASKS,
                                        lambda env: env.unwrapped.adapter.expert_plan(), args.rounds),
            "WebShop": added_step_time("WebShop-Rubric-v0", {}, web_tasks,
                                       lambda env: expert_actions(env.unwrapped.adapter), args.rounds),
        },
        "throughput_alfworld": throughput(alf, args.window_s, [1, 4, 16]),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        atomic_write_json(OUT, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
