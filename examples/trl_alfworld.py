"""Train SmolLM2 on ALFWorld in TRL's GRPOTrainer with rubricgym's TRCA per-step advantages.

Each prompt row is one ALFWorld task and seed; TRL's sampler repeats it ``--group`` times, and
``rubricgym_rollout_func`` plays the episodes with TRL's model (the whole multi-turn exchange
is one completion, observations masked). ``RubricGRPOTrainer`` then replaces TRL's one
advantage per completion by TRCA's per-step advantages on each step's action tokens.
docs/integrations.md explains the pieces; the test suite runs this script with a tiny model:

    python examples/trl_alfworld.py                               # SmolLM2-135M, LoRA, CPU
    python examples/trl_alfworld.py --model tiny --steps 1 --max-steps 2 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="'smollm2', 'tiny' (random, seconds) or a local folder")
    parser.add_argument("--estimator", default="trca", help="grpo, trca, trca_no_rf, trca_no_rb")
    parser.add_argument("--steps", type=int, default=20, help="TRL optimizer steps")
    parser.add_argument("--group", type=int, default=4, help="rollouts per task (num_generations)")
    parser.add_argument("--tasks", type=int, default=1, help="tasks (groups) per step")
    parser.add_argument("--max-steps", type=int, default=8, help="env steps per episode")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="tokens per turn")
    parser.add_argument("--max-completion-length", type=int, default=2048, help="tokens per episode (all turns)")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--vllm", action="store_true",
                        help="GPU: generate every turn with TRL's colocated vLLM engine (needs vllm and CUDA)")
    args = parser.parse_args(argv)

    from peft import LoraConfig
    from trl import GRPOConfig

    from rubricgym.integrations.trl import RubricGRPOTrainer, rubricgym_dataset, rubricgym_rollout_func
    from rubricgym.models import load_causal_lm

    env_id = "ALFWorld-Rubric-v0"
    model, tokenizer = load_causal_lm(args.model, device="cuda" if args.vllm else "cpu", seed=0)
    batch = args.group * args.tasks
    config = GRPOConfig(
        output_dir=args.output_dir or tempfile.mkdtemp(prefix="trl_alfworld_"),
        per_device_train_batch_size=batch, num_generations=args.group, max_steps=args.steps,
        max_completion_length=args.max_completion_length, learning_rate=args.lr, temperature=1.0,
        beta=0.0, loss_type="dapo", mask_truncated_completions=False, use_cpu=not args.vllm, bf16=False,
        use_vllm=args.vllm, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3,
        report_to="none", save_strategy="no", logging_steps=1, seed=0, gradient_checkpointing=False,
    )
    trainer = RubricGRPOTrainer(
        model=model, args=config, processing_class=tokenizer, estimator=args.estimator,
        train_dataset=rubricgym_dataset(env_id, seeds=range(args.steps * args.tasks)),
        rollout_func=rubricgym_rollout_func(env_id, max_steps=args.max_steps, max_new_tokens=args.max_new_tokens),
        peft_config=LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, task_type="CAUSAL_LM",
                               target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]),
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    episodes = trainer.last_episodes
    result = {"steps": trainer.state.global_step, "loss": logs[-1]["loss"] if logs else None,
              "grad_norm": logs[-1].get("grad_norm") if logs else None,
              "successes": sum(bool(e.success) for e in episodes), "episodes": len(episodes),
              "env_steps": sum(len(e.steps) for e in episodes)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
