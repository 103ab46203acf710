"""rubricgym's per-step credit inside TRL: what it costs, and TRL's route vs rubricgym's trainer.

Same env (``ALFWorld-Rubric-v0``, the same tasks and seeds), model, group size, per-turn token
budget, episode length, LoRA rank and estimator (``trca``) for both:

* TRL route: ``RubricGRPOTrainer`` + ``rubricgym_rollout_func`` (chat prompts, one completion
  per episode). Per optimizer step: wall time, and inside it generation (the model), the env
  (reset/step), rubricgym's rollout bookkeeping (prompt rendering, token spans, observation
  turns) and its credit (episodes read, advantages computed and placed).
  ``rubricgym_share`` = (bookkeeping + credit) / step wall time (target: under 5%).
* rubricgym's trainer with ``prompt.style=chat``: its iteration time and response tokens.

Tokens/s = model-written tokens / optimizer-step wall time. The first step of each is a
warm-up and is not timed. The episodes are sampled, so the two sides see the same tasks and
seeds but not identical texts.

    .venv/bin/python benchmarks/trl_step_credit.py [--model smollm2|tiny] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_ID = "ALFWorld-Rubric-v0"


def run_trl(args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from rubricgym.integrations.trl import RubricGRPOTrainer, rubricgym_dataset, rubricgym_rollout_func
    from rubricgym.models import load_causal_lm

    model, tokenizer = load_causal_lm(args.model, device="cpu", seed=0)
    rollout = rubricgym_rollout_func(ENV_ID, max_steps=args.max_steps, max_new_tokens=args.max_new_tokens)
    steps: list[dict[str, float]] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t0, self.before = time.perf_counter(), (dict(rollout.seconds), trainer.credit_seconds)

        def on_step_end(self, *a: Any, **k: Any) -> None:
            seconds, credit = self.before
            row = {f"{k}_s": rollout.seconds[k] - seconds[k] for k in rollout.seconds}
            row["credit_s"] = trainer.credit_seconds - credit
            row["step_s"] = time.perf_counter() - self.t0
            row["model_tokens"] = float(sum(s.response[1] - s.response[0] for e in trainer.last_episodes
                                            for s in e.steps))
            row["env_steps"] = float(sum(len(e.steps) for e in trainer.last_episodes))
            steps.append(row)

    config = GRPOConfig(
        output_dir=str(out_dir / "trl"), per_device_train_batch_size=args.group * args.tasks,
        num_generations=args.group, max_steps=args.iterations, max_completion_length=args.max_completion_length,
        learning_rate=args.lr, temperature=1.0, top_p=1.0, beta=0.0, loss_type="dapo",
        mask_truncated_completions=False, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        logging_steps=1, seed=0, gradient_checkpointing=False, shuffle_dataset=False,
    )
    trainer = RubricGRPOTrainer(
        model=model, args=config, processing_class=tokenizer, estimator="trca", callbacks=[Clock()],
        train_dataset=rubricgym_dataset(ENV_ID, seeds=range(args.iterations * args.tasks)), rollout_func=rollout,
        peft_config=LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0, task_type="CAUSAL_LM",
                               target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
    )
    trainer.train()
    rollout.close()
    timed = steps[1:] or steps
    total = {k: sum(r[k] for r in timed) for k in timed[0]}
    return {**{k: round(v, 4) for k, v in total.items()}, "steps_timed": len(timed),
            "model_tok_s": total["model_tokens"] / total["step_s"],
            "rubricgym_share": (total["bookkeeping_s"] + total["credit_s"]) / total["step_s"],
            "generation_share": total["generation_s"] / total["step_s"],
            "environment_share": total["environment_s"] / total["step_s"]}


def run_rubricgym(args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    config = load_config(None, [
        f"model.name={args.model}", "model.device=cpu", f"env.id={ENV_ID}", f"env.max_steps={args.max_steps}",
        "prompt.style=chat", "algorithm.advantage=trca", f"algorithm.group_size={args.group}",
        f"algorithm.tasks_per_iteration={args.tasks}", f"algorithm.lr={args.lr}", "algorithm.kl_coef=0.0",
        f"generation.max_new_tokens={args.max_new_tokens}", "generation.temperature=1.0",
        f"lora.r={args.lora_r}", f"lora.alpha={2 * args.lora_r}", f"run.iterations={args.iterations}",
        "run.progress=false", "run.evaluate_after=false", "run.tensorboard=false", "warmup.enabled=false",
        f"run.threads={args.threads}", f"run.output_dir={out_dir}", "run.name=rubricgym",
    ])
    trainer = Trainer(config)
    try:
        rows = [trainer.train_iteration() for _ in range(args.iterations)]
    finally:
        trainer.close()
    timed = rows[1:] or rows
    step_s = sum(r["time/iteration_s"] for r in timed)
    tokens = sum(r["tokens/response"] for r in timed)
    return {"step_s": round(step_s, 4), "model_tokens": tokens, "steps_timed": len(timed),
            "model_tok_s": tokens / step_s,
            "generation_s": round(sum(r["time/generation_s"] for r in timed), 4),
            "environment_s": round(sum(r["time/environment_s"] for r in timed), 4),
            "credit_s": round(sum(r["time/credit_s"] for r in timed), 4)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2", help="smollm2 | tiny")
    ap.add_argument("--group", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=3, help="env steps per episode")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="tokens per turn")
    ap.add_argument("--max-completion-length", type=int, default=4096, help="TRL: tokens per episode")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--lora-r", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", dest="out", default=None, help="write the result here (JSON)")
    args = ap.parse_args(argv)

    import torch
    import transformers
    import trl

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_rubricgym(args, Path(tmp))
        torch.set_num_threads(args.threads)
        theirs = run_trl(args, Path(tmp))
    out = {
        "benchmark": "trl_step_credit",
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0]},
        "trl_route": theirs, "rubricgym_trainer": ours,
        "rubricgym_share_of_trl_step": theirs["rubricgym_share"],
        "target_share": 0.05,
        "ratio_model_tok_s_trl_over_rubricgym": theirs["model_tok_s"] / ours["model_tok_s"],
        "note": "same env, tasks, seeds, model and budgets; sampled episodes differ. rubricgym_share = rollout "
                "bookkeeping + credit over the TRL step's wall time (generation and env stepping excluded).",
    }
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
