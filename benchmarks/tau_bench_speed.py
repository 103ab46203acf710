"""tau-bench step speed: tau2's own gym env (``tau2.gym.AgentGymEnv``) vs ``gym.make("TauBench-...")``.

Both sides replay the same gold-action sequences of the same official tasks with the same
scripted user and the same task caching: tau2's env gets its ``_get_task`` answered from the
tasks loaded once (stock tau2 re-reads the task file several times per step) and its
``_get_user`` answered with rubricgym's ``ScriptedUser``. The rubricgym side runs with its
default reward (the TRCA operator library), facts, transitions and database fingerprints
included. Each episode is timed from reset to its last step, tau2's final evaluation included;
rounds alternate between the two sides so machine load hits both alike.

    python benchmarks/tau_bench_speed.py [--domain retail] [--tasks 12] [--rounds 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import rubricgym  # noqa: F401
from rubricgym.adapters.tau_bench import engine as tau
from rubricgym.adapters.tau_bench.expert import gold_replay
from rubricgym.adapters.tau_bench.users import ScriptedUser
from rubricgym.atomic_files import atomic_write_json
from tau2.gym.gym_agent import AgentGymEnv

ENV_IDS = {"retail": "TauBench-Retail-Rubric-v0", "airline": "TauBench-Airline-Rubric-v0",
           "telecom": "TauBench-Telecom-Rubric-v0", "mock": "TauBench-Mock-Rubric-v0"}


class CachedTau2GymEnv(AgentGymEnv):
    """tau2's gym env with the task answered from memory and rubricgym's scripted user."""

    def __init__(self, task: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self._task = task

    def _get_task(self) -> Any:
        return self._task

    def _get_user(self) -> Any:
        env = self._get_environment()
        return ScriptedUser(self._task, tau.user_tools(env), self._agent_calls)

    def _agent_calls(self) -> list[Any]:
        orch = self._orchestrator
        return [tc for m in (orch.trajectory if orch else []) if isinstance(m, tau.AssistantMessage) and m.tool_calls
                for tc in m.tool_calls]


def run_tau2(domain: str, tasks: list[Any], plans: dict[str, list[str]]) -> tuple[float, int, list[float]]:
    spent, steps, rewards = 0.0, 0, []
    for task in tasks:
        t0 = time.perf_counter()
        env = CachedTau2GymEnv(task, domain=domain, task_id=task.id, max_steps=1000)
        env.reset()
        reward, term = 0.0, False
        for action in plans[task.id]:
            _, reward, term, _, _ = env.step(action)
            steps += 1
            if term:
                break
        spent += time.perf_counter() - t0
        rewards.append(float(reward))
    return spent, steps, rewards


def run_rubricgym(env: gym.Env, tasks: list[Any], plans: dict[str, list[str]]) -> tuple[float, int, list[float]]:
    spent, steps, rewards = 0.0, 0, []
    for task in tasks:
        t0 = time.perf_counter()
        env.reset(seed=0, options={"task_id": task.id})
        reward, term = 0.0, False
        for action in plans[task.id]:
            _, _, term, trunc, info = env.step(f"<think>next</think><action>{action}</action>")
            reward = info["transition"].env_reward  # tau2's reward (the step reward adds TRCA shaping)
            steps += 1
            if term or trunc:
                break
        spent += time.perf_counter() - t0
        rewards.append(float(reward))
    return spent, steps, rewards


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", default="retail", choices=sorted(ENV_IDS))
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args()

    env = gym.make(ENV_IDS[args.domain], max_steps=1000)  # default reward: the TRCA operator library
    dom = env.unwrapped.adapter.domain
    tasks = [dom.tasks[t] for t in dom.order[: args.tasks]]
    plans = {t.id: gold_replay(t) for t in tasks}
    run_rubricgym(env, tasks[:1], plans)  # warm both sides (imports, first DB validation)
    run_tau2(args.domain, tasks[:1], plans)
    rounds = []
    for _ in range(args.rounds):
        a = run_tau2(args.domain, tasks, plans)
        b = run_rubricgym(env, tasks, plans)
        if a[1] != b[1] or a[2] != b[2]:
            raise SystemExit(f"the two sides diverged: steps {a[1]} vs {b[1]}, rewards {a[2]} vs {b[2]}")
        rounds.append({"tau2_s": a[0], "rubricgym_s": b[0], "steps": a[1],
                       "tau2_steps_per_s": a[1] / a[0], "rubricgym_steps_per_s": b[1] / b[0],
                       "overhead": b[0] / a[0] - 1.0})
    result = {
        "benchmark": "tau_bench_speed", "domain": args.domain, "tasks": len(tasks), "rounds": args.rounds,
        "steps_per_round": rounds[0]["steps"], "mean_reward": statistics.mean(run_rubricgym(env, tasks, plans)[2]),
        "tau2_steps_per_s": statistics.median(r["tau2_steps_per_s"] for r in rounds),
        "rubricgym_steps_per_s": statistics.median(r["rubricgym_steps_per_s"] for r in rounds),
        "overhead_median": statistics.median(r["overhead"] for r in rounds),
        "target_overhead": 0.05, "per_round": rounds,
    }
    result["within_target"] = result["overhead_median"] < result["target_overhead"]
    print(json.dumps(result, indent=2))
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
