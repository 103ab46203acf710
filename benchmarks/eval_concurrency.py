"""``rubricgym eval`` throughput: episodes per minute at concurrency 1 and 4 against the local
llama.cpp server (SmolLM2-135M, ``rubricgym serve-llm``'s server) on the same tasks, and their
ratio. Each concurrency level is one fresh ``run_eval`` (worker start-up included: what a user
waits for). Env-bound work overlaps across worker processes; generation on a CPU server does
not, so the ratio says how I/O- or engine-bound an env's episodes are.

    python benchmarks/eval_concurrency.py [--env ALFWorld-Rubric-Eval-v0] [--n 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from rubricgym.atomic_files import atomic_write_json
from rubricgym.llm_server import MODEL_ALIAS, LocalLLMServer
from rubricgym.registration import task_ids
from rubricgym.trainers.eval import EvalSettings, PolicySpec, run_eval

OUT = Path(__file__).resolve().parent / "results" / "eval_concurrency.json"


def measure(server: LocalLLMServer, env_id: str, tasks: list[str], concurrency: int, max_steps: int,
            max_tokens: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        settings = EvalSettings(env_id=env_id, tasks=tasks, concurrency=concurrency, max_steps=max_steps,
                                out=str(Path(folder) / "eval"),
                                policy=PolicySpec(kind="endpoint", base_url=server.base_url, model=MODEL_ALIAS,
                                                  api_key_env="RUBRICGYM_BENCH_NO_KEY", max_tokens=max_tokens))
        started = time.perf_counter()
        summary = run_eval(settings)
        seconds = time.perf_counter() - started
    return {"concurrency": concurrency, "episodes": summary["episodes"], "seconds": round(seconds, 2),
            "episodes_per_minute": round(60 * summary["episodes"] / seconds, 3),
            "outcomes": summary["outcomes"], "completion_tokens": summary["completion_tokens"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALFWorld-Rubric-Eval-v0")
    parser.add_argument("--n", type=int, default=8, help="tasks (one episode each)")
    parser.add_argument("--max-steps", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--json", action="store_true", help=f"write {OUT.relative_to(OUT.parents[2])}")
    args = parser.parse_args()
    tasks = list(task_ids(args.env))[: args.n]
    os.environ.setdefault("RUBRICGYM_BENCH_NO_KEY", "no-key")  # a local server takes no key
    with LocalLLMServer() as server:
        rows = [measure(server, args.env, tasks, c, args.max_steps, args.max_tokens) for c in (1, 4)]
    result = {"benchmark": "eval_concurrency", "env_id": args.env, "tasks": len(tasks), "max_steps": args.max_steps,
              "max_tokens": args.max_tokens, "server": "llama.cpp, SmolLM2-135M-Instruct (Q8 GGUF), CPU",
              "machine": f"{platform.machine()}, {os.cpu_count()} cores", "runs": rows,
              "ratio_4_to_1": round(rows[1]["episodes_per_minute"] / rows[0]["episodes_per_minute"], 3)}
    print(json.dumps(result, indent=2))
    if args.json:
        atomic_write_json(OUT, result)


if __name__ == "__main__":
    main()
