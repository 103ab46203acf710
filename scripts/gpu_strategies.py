"""Every parallel strategy that can run on one device, one after the other, each in a process
group of one (the engines run; nothing is partitioned across devices): replicated, FSDP, DeepSpeed
ZeRO-2 and ZeRO-3, bf16 autocast replicated and under FSDP, fp16 (loss-scaled) replicated. Two training iterations each on
the word env, in a fresh process per strategy (a process group and DeepSpeed's state per run).

    python scripts/gpu_strategies.py --device cuda --model random-135m --out trainer_gpu_strategies.json
    python scripts/gpu_strategies.py --device cpu --model tiny --out /tmp/strategies.json   # the same on CPU

Needs rubricgym importable and tests/ on PYTHONPATH (the word env); ZeRO needs DeepSpeed
(scripts/gpu_check.sh installs carried wheels first). A strategy that fails is recorded with
its error, and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STRATEGIES: dict[str, list[str]] = {
    "replicated": [],
    "fsdp": ["run.fsdp=true"],
    "zero2": ["run.deepspeed_zero=2"],
    "zero3": ["run.deepspeed_zero=3"],
    "replicated-bf16": ["run.mixed_precision=bf16"],
    "fsdp-bf16": ["run.fsdp=true", "run.mixed_precision=bf16"],
    "replicated-fp16": ["run.mixed_precision=fp16"],
}


def settings(device: str, model: str, run_dir: Path) -> list[str]:
    return [f"model.name={model}", f"model.device={device}", "env.factory=word", "env.max_steps=2",
            "algorithm.advantage=grpo", "algorithm.group_size=4", "algorithm.tasks_per_iteration=2",
            "algorithm.skip_zero_advantage=false", "algorithm.micro_batch_size=4", "generation.max_new_tokens=16",
            "run.iterations=2", "run.progress=false", "run.evaluate_after=false", "run.tensorboard=false",
            "warmup.enabled=false", f"run.output_dir={run_dir}", "run.name=run"]


def child(name: str, device: str, model: str, run_dir: Path) -> dict:
    """One strategy in this process: open a group of one, train, report."""
    import torch
    import torch.distributed as dist
    import trainer.word_env  # noqa: F401  (registers env.factory=word: tests/ is on PYTHONPATH)

    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # what a launcher sets (DeepSpeed reads them), for a group of one
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", rank=0, world_size=1)
    try:
        trainer = Trainer(load_config(None, [*settings(device, model, run_dir), *STRATEGIES[name]]))
        started = time.perf_counter()
        trainer.train(evaluate=False)
        wall = time.perf_counter() - started
        metrics = trainer.read_metrics()
        out = {"strategy": trainer.parallel.label, "precision": trainer.parallel.plan.mixed_precision,
               "iterations": len(metrics), "wall_s": wall,
               "last": {k: metrics[-1].get(k) for k in ("trained_samples", "loss", "kl", "grad_norm",
                                                         "throughput/update_tok_s", "memory/peak_gib")}}
        trainer.close()
        return out
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="random-135m")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", default=list(STRATEGIES))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.device, args.model, args.run_dir)), flush=True)
        return 0
    results = {}
    for name in args.only:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, __file__, "--child", name, "--device", args.device, "--model", args.model,
                   "--out", str(args.out), "--run-dir", tmp]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=os.environ.copy())
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
                results[name] = (json.loads(lines[-1][7:]) if done.returncode == 0 and lines
                                 else {"error": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]})
            except subprocess.TimeoutExpired:
                results[name] = {"error": [f"timed out after {args.timeout:g} s"]}
        print(name, json.dumps(results[name]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": args.device, "model": args.model, "results": results}, indent=2))
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
