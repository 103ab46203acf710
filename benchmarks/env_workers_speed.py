"""Env-worker throughput, measured in one run: the same lockstep rollouts (scripted responses,
no model, so the engines' time is what is measured) with the envs in the trainer's process,
in 1 worker and in 2 workers; env steps per second and the ratios.

    .venv/bin/python benchmarks/env_workers_speed.py [--backend process|ray] [--json OUT]

Worker start-up and env construction are excluded (one untimed warm-up round builds every
env); rounds are interleaved across the three set-ups; each timed round resets and plays tasks x group_size rollouts to ``--max-steps``.
The speed-up is bounded by the free CPU cores: on a shared 2-core machine expect well
under 2x.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

TEXTS = ["<action>look</action>", "<action>inventory</action>", "<action>go to desk 1</action>",
         "<action>open drawer 1</action>", "<action>go to shelf 1</action>", "<action>examine shelf 1</action>"]
APPWORLD_TEXTS = ["<action>print(apis.api_docs.show_app_descriptions())</action>",
                  "<action>print(apis.supervisor.show_profile())</action>",
                  "<action>print(apis.api_docs.show_api_descriptions(app_name='spotify'))</action>",
                  "<action>print(1 + 1)</action>"]


class CyclingScript:
    """Rollout i at turn t answers ``texts[(t + i) % n]``; counts the responses it gave."""

    texts = TEXTS

    def __init__(self, tok: Any):
        self.tok, self.turn, self.steps = tok, 0, 0
        self.ids = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in self.texts]

    def generate(self, prompts: list[list[int]]) -> list[list[int]]:
        out = [self.ids[(self.turn + i) % len(self.ids)] for i in range(len(prompts))]
        self.turn += 1
        self.steps += len(prompts)
        return out

    def sync_weights(self, model: Any, iteration: int) -> None:
        pass


def one_round(collector: Any, tok: Any, tasks: list[tuple[str, int]],
              group_size: int) -> tuple[int, float, int, float]:
    from rubricgym.trainers.rollout import RolloutTimings

    script = CyclingScript(tok)
    timings = RolloutTimings()
    t0 = time.perf_counter()
    groups = collector.collect(script, tasks, group_size, timings)
    seconds = time.perf_counter() - t0
    return script.steps, seconds, sum(r.error is not None for g in groups for r in g), timings.environment


def measure(collectors: dict[str, Any], tok: Any, tasks: list[tuple[str, int]], group_size: int,
            rounds: int) -> dict[str, dict[str, float]]:
    """Rounds interleaved across the set-ups (a, b, c, a, b, c, ...) so that a change in the
    machine's load hits all of them alike; one untimed round each first builds every env."""
    for collector in collectors.values():
        one_round(collector, tok, tasks, group_size)
    totals = {name: [0, 0.0, 0, 0.0] for name in collectors}
    for _ in range(rounds):
        for name, collector in collectors.items():
            for k, value in enumerate(one_round(collector, tok, tasks, group_size)):
                totals[name][k] += value
    # environment_s: time inside the resets and steps (for workers: the parallel calls, waiting
    # included); the rest of a round is the trainer's own work (prompts, tokens, records)
    return {name: {"env_steps": t[0], "seconds": t[1], "steps_per_s": t[0] / t[1], "rollout_errors": t[2],
                   "environment_s": t[3], "trainer_side_s": t[1] - t[3]}
            for name, t in totals.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env-id", default="ALFWorld-Rubric-v0")
    ap.add_argument("--env-kwargs", default="{}", help='JSON passed to gym.make, e.g. \'{"reward": "none"}\'')
    ap.add_argument("--backend", choices=["process", "ray"], default="process")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", dest="out", default=None, help="write the result here (JSON)")
    args = ap.parse_args(argv)

    from rubricgym.prompts import PromptSettings

    from rubricgym.trainers.config import EnvSettings
    from rubricgym.trainers.env_workers import build_collector, ensure_ray
    from rubricgym.trainers.rollout import RolloutCollector, make_env_factory

    from rubricgym.models import build_tiny_model

    if "AppWorld" in args.env_id:
        CyclingScript.texts = APPWORLD_TEXTS  # code cells (one AppWorld server per env)
    _, tok = build_tiny_model(0)
    prompt = PromptSettings()
    settings = EnvSettings(id=args.env_id, max_steps=args.max_steps, kwargs=json.loads(args.env_kwargs))
    local = RolloutCollector(make_env_factory(settings), tok, prompt, args.max_steps)
    names = list(local.env(0).unwrapped.adapter.task_ids())
    tasks = [(names[k % len(names)], 100 + k) for k in range(args.tasks)]
    if args.backend == "ray":
        ensure_ray(None, num_cpus=2)
    collectors: dict[str, Any] = {"in_process": local}
    load_before = os.getloadavg()[0]
    try:
        for n in (1, 2):
            collectors[f"workers_{n}"] = build_collector(
                settings.model_copy(update={"workers": n, "worker_backend": args.backend}), None, tok, prompt,
                args.max_steps)
        results = measure(collectors, tok, tasks, args.group_size, args.rounds)
    finally:
        for collector in collectors.values():
            collector.close()
    one, two = results["workers_1"]["steps_per_s"], results["workers_2"]["steps_per_s"]
    out = {
        "benchmark": "env_workers_speed",
        "env_id": args.env_id, "env_kwargs": settings.kwargs, "backend": args.backend, "tasks": args.tasks, "group_size": args.group_size,
        "max_steps": args.max_steps, "rounds": args.rounds,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                    "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]}},
        "results": results,
        "ratio_2_workers_vs_1": two / one,
        "ratio_1_worker_vs_in_process": one / results["in_process"]["steps_per_s"],
        "ratio_2_workers_vs_in_process": two / results["in_process"]["steps_per_s"],
    }
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
