"""rubricgym's trainer vs TRL's ``GRPOTrainer`` in one run, single-turn (the case both support).

Same model, same prompts (the pick-the-word task's first-step prompt, rendered by
rubricgym's prompt builder and given to TRL as the same text), same group size, token
budget, sampling temperature, LoRA settings, learning rate, clip band and KL coefficient.
Each trainer makes ``--iterations`` optimizer steps; the first is a warm-up and is not timed.

    .venv/bin/python benchmarks/trainer_vs_trl.py [--model smollm2|tiny] [--json OUT]

Reported per trainer and as ratios rubricgym / TRL:
* generation tokens/s: sampled response tokens / seconds inside the sampling call
  (rubricgym: ``HFGenerator.generate``; TRL: ``GRPOTrainer._generate``);
* update tokens/s: (prompt + response tokens) / seconds of the rest of the optimizer step
  (rubricgym: ``ppo_update``, reference pass included; TRL: the step's wall time minus its
  ``_generate`` time, which also holds the reward call and the reference pass).
Both trainers run in this process on the same threads, one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORRECT = "<action>apple</action>"


def word_prompts(tok: Any, tasks: int) -> list[list[int]]:
    """The first-step prompt of each word task, as the rubricgym trainer renders it."""
    sys.path.insert(0, str(ROOT / "tests"))
    from rubricgym.prompts import PromptSettings
    from rubricgym.prompts import EpisodeView, render_prompt
    from trainer.word_env import make_word_env

    env = make_word_env(max_steps=1, num_tasks=tasks)
    out = []
    for k in range(tasks):
        obs, info = env.reset(seed=k, options={"task_id": f"pick-{k}"})
        view = EpisodeView("WordPick", str(info["instruction"]), obs, obs, info.get("admissible_actions"))
        out.append(render_prompt(tok, view, PromptSettings()))
    return out


def run_rubricgym(args: argparse.Namespace, out_dir: Path) -> dict[str, float]:
    from rubricgym.trainers.config import load_config
    from rubricgym.trainers.trainer import Trainer

    sys.path.insert(0, str(ROOT / "tests"))
    import trainer.word_env  # noqa: F401  (tests/ is on the path only now; registers env.factory=word)

    config = load_config(None, [
        f"model.name={args.model}", "model.device=cpu", "env.factory=word",
        f"env.kwargs={{num_tasks: {args.tasks}}}", "env.max_steps=1", "algorithm.advantage=grpo",
        f"algorithm.group_size={args.group_size}", f"algorithm.tasks_per_iteration={args.tasks}",
        f"algorithm.lr={args.lr}", "algorithm.kl_coef=0.04", "algorithm.entropy_coef=0.0",
        "algorithm.clip_low=0.2", "algorithm.clip_high=0.28", "algorithm.skip_zero_advantage=false",
        "algorithm.loss_aggregation=token_mean", f"algorithm.micro_batch_size={args.group_size * args.tasks}",
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
    gen_tokens = sum(r["tokens/response"] for r in timed)
    gen_s = sum(r["time/generation_s"] for r in timed)
    upd_tokens = sum(r["tokens/response"] + r["tokens/prompt"] for r in timed)
    upd_s = sum(r["time/update_s"] for r in timed)
    return {"generation_tokens": gen_tokens, "generation_s": gen_s, "generation_tok_s": gen_tokens / gen_s,
            "update_tokens": upd_tokens, "update_s": upd_s, "update_tok_s": upd_tokens / upd_s,
            "steps_timed": len(timed), "reward_mean": sum(r["return_mean"] for r in rows) / len(rows)}


def run_trl(args: argparse.Namespace, out_dir: Path, prompt_texts: list[str]) -> dict[str, float]:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rubricgym.models import load_causal_lm

    model, tok = load_causal_lm(args.model, device="cpu", seed=0)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    n = args.group_size * args.tasks
    data = Dataset.from_list([{"prompt": p} for p in prompt_texts] * (args.iterations * 2))

    def reward(completions: list[str], **_: Any) -> list[float]:
        return [1.0 if CORRECT in c else 0.0 for c in completions]

    gen_s: list[float] = []
    gen_tokens: list[int] = []
    upd_tokens: list[int] = []

    class Timed(GRPOTrainer):
        def _generate(self, prompts: list) -> Any:
            t0 = time.perf_counter()
            out = super()._generate(prompts)
            gen_s.append(time.perf_counter() - t0)
            return out

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            out = super()._generate_and_score_completions(inputs)
            gen_tokens.append(int(out["completion_mask"].sum()))
            upd_tokens.append(int(out["completion_mask"].sum() + out["prompt_mask"].sum()))
            return out

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.walls: list[float] = []
            self.t0 = 0.0

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            self.walls.append(time.perf_counter() - self.t0)

    clock = StepClock()
    cfg = GRPOConfig(
        output_dir=str(out_dir / "trl"), per_device_train_batch_size=n, num_generations=args.group_size,
        max_completion_length=args.max_new_tokens, temperature=1.0, top_p=1.0, learning_rate=args.lr,
        beta=0.04, epsilon=0.2, epsilon_high=0.28, num_iterations=1, gradient_accumulation_steps=1,
        max_steps=args.iterations, logging_steps=1, report_to="none", use_cpu=True, bf16=False,
        save_strategy="no", loss_type="dapo", shuffle_dataset=False, seed=0, disable_dropout=True,
        mask_truncated_completions=False, gradient_checkpointing=False,  # rubricgym's CPU default is off too
    )
    peft = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM")
    torch.set_num_threads(args.threads)
    trainer = Timed(model=model, reward_funcs=reward, args=cfg, train_dataset=data, processing_class=tok,
                    peft_config=peft, callbacks=[clock])
    trainer.train()
    torch.set_num_threads(args.threads)
    k = 1 if len(clock.walls) > 1 else 0
    generate_s = sum(gen_s[k:])
    upd_s = sum(w - g for w, g in zip(clock.walls[k:], gen_s[k:]))
    generated = sum(gen_tokens[k:])
    updated = sum(upd_tokens[k:])
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {"generation_tokens": generated, "generation_s": generate_s, "generation_tok_s": generated / generate_s,
            "update_tokens": updated, "update_s": upd_s, "update_tok_s": updated / upd_s,
            "steps_timed": len(clock.walls) - k, "reward_mean": sum(rewards) / len(rewards) if rewards else None}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2", help="smollm2 | tiny")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", dest="out", default=None, help="write the result here (JSON)")
    args = ap.parse_args(argv)

    import torch
    import trl

    from rubricgym.models import load_causal_lm

    torch.set_num_threads(args.threads)
    _, tok = load_causal_lm(args.model, device="cpu", seed=0)
    prompt_texts = [tok.decode(p, skip_special_tokens=False) for p in word_prompts(tok, args.tasks)]
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_rubricgym(args, Path(tmp))
        theirs = run_trl(args, Path(tmp), prompt_texts)
    import transformers

    out = {
        "benchmark": "trainer_vs_trl",
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_average_1min": os.getloadavg()[0]},
        "rubricgym": ours, "trl": theirs,
        "ratio_generation_tok_s": ours["generation_tok_s"] / theirs["generation_tok_s"],
        "ratio_update_tok_s": ours["update_tok_s"] / theirs["update_tok_s"],
        "note": "ratios are rubricgym / TRL, same process, one after the other; the update side of TRL "
                "also holds its reward call and reference pass (see the script's docstring)",
    }
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
