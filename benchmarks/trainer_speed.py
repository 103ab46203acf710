"""Trainer speed, measured in one run (ratios against a baseline of the same run):

1. rollout generation tokens/s, batched over the group, vs single-sequence generation
   of the same prompt with the same model (the batching speed-up)
2. update tokens/s (prompt + response tokens through reference, forward and backward)
3. the share of an iteration spent in generation, environment, tokenization, credit, update
4. on CUDA: peak GPU memory

CPU (the default: SmolLM2-135M on the bundled ALFWorld games):

    .venv/bin/python benchmarks/trainer_speed.py [--iterations 1] [--json OUT]

GPU check (see scripts/gpu_check.sh): ``--device cuda --model random-135m --env word``.
The update trains every response token (``skip_zero_advantage=false``), its worst case.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def word_env_factory() -> str:
    """The pick-the-word test env (pure Python: no benchmark engine needed)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import trainer.word_env  # noqa: F401  (tests/ is on the path only now; registers env.factory=word)

    return "word"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--env", choices=["alfworld", "word"], default="alfworld")
    ap.add_argument("--advantage", default="grpo")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--micro-batch-size", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--gradient-checkpointing", choices=["auto", "on", "off"], default="auto")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--lora-r", type=int, default=None, help="LoRA rank (default: the trainer's)")
    ap.add_argument("--lora-all-linear", action="store_true", help="LoRA on the MLP projections too")
    ap.add_argument("--json", dest="out", default=None, help="write the result here (JSON)")
    args = ap.parse_args(argv)

    from rubricgym.trainers.config import load_config
    from rubricgym.prompts import EpisodeView, render_prompt
    from rubricgym.trainers.trainer import Trainer

    import tempfile

    overrides = [
        f"model.name={args.model}", f"model.device={args.device}", f"model.dtype={args.dtype}",
        f"algorithm.advantage={args.advantage}", f"algorithm.group_size={args.group_size}",
        f"algorithm.tasks_per_iteration={args.tasks}", f"algorithm.micro_batch_size={args.micro_batch_size}",
        "algorithm.skip_zero_advantage=false", f"env.max_steps={args.max_steps}",
        f"generation.max_new_tokens={args.max_new_tokens}", f"run.iterations={args.iterations}",
        "run.progress=false", "run.tensorboard=false", "run.evaluate_after=false",
    ]
    if args.env == "word":
        overrides.append(f"env.factory={word_env_factory()}")
    if args.gradient_checkpointing != "auto":
        overrides.append(f"model.gradient_checkpointing={args.gradient_checkpointing == 'on'}")
    if args.threads:
        overrides.append(f"run.threads={args.threads}")
    if args.lora_r:
        overrides += [f"lora.r={args.lora_r}", f"lora.alpha={2 * args.lora_r}"]
    if args.lora_all_linear:
        overrides.append("lora.target_modules=[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]")
    config = load_config(None, overrides)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        trainer = Trainer(config, Path(tmp) / "run")
        load_s = time.perf_counter() - t0

        # baseline: one sequence at a time, the first task's first prompt
        env = trainer.collector.env(0)
        task_id, seed = trainer.tasks_for(0, 1)[0]
        obs, info = env.reset(seed=seed, options={"task_id": task_id})
        prompt = render_prompt(trainer.tokenizer, EpisodeView("bench", str(info.get("instruction", "")), obs, obs,
                                                              info.get("admissible_actions")), config.prompt)
        trainer.generator.generate([prompt])  # warm-up
        torch.manual_seed(0)
        t0 = time.perf_counter()
        single = trainer.generator.generate([prompt, ])
        single_tok_s = len(single[0]) / (time.perf_counter() - t0)

        if trainer.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(trainer.device)
        per_iter = [trainer.train_iteration() for _ in range(args.iterations)]
        trainer.close()

    def total(key: str) -> float:
        return sum(m.get(key, 0.0) for m in per_iter)

    phases = {"generation": total("time/generation_s"), "environment": total("time/environment_s"),
              "tokenization": total("time/tokenization_s"), "credit": total("time/credit_s"),
              "update": total("time/update_s")}
    wall = total("time/iteration_s")
    batched_tok_s = total("tokens/response") / max(phases["generation"], 1e-9)
    result = {
        "benchmark": "trainer_speed",
        "device": str(trainer.device),
        "device_name": torch.cuda.get_device_name(trainer.device) if trainer.device.type == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": args.model,
        "dtype": str(next(trainer.model.parameters()).dtype),
        "env": args.env,
        "group_size": args.group_size, "tasks": args.tasks, "max_steps": args.max_steps,
        "max_new_tokens": args.max_new_tokens, "iterations": args.iterations,
        "lora_r": config.lora.r, "lora_targets": list(config.lora.target_modules),
        "load_s": round(load_s, 2),
        "single_generation_tok_s": round(single_tok_s, 2),
        "batched_generation_tok_s": round(batched_tok_s, 2),
        "batching_speedup": round(batched_tok_s / max(single_tok_s, 1e-9), 2),
        "update_tok_s": round(total("update_tokens") / max(phases["update"], 1e-9), 2),
        "update_tokens": total("update_tokens"),
        "response_tokens": total("tokens/response"),
        "iteration_s": round(wall, 2),
        "share": {k: round(v / max(wall, 1e-9), 4) for k, v in phases.items()},
        "peak_gpu_memory_gib": round(max(m.get("memory/peak_gib", 0.0) for m in per_iter), 3),
        "kl_last": per_iter[-1].get("kl"),
        "loss_last": per_iter[-1].get("loss"),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
