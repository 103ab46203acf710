"""A real TRL ``RubricGRPOTrainer`` on ALFWorld with the tiny random model: one or two groups
of G=2, episodes of up to 3 steps, replies steered to 'look' or 'inventory' actions."""

from __future__ import annotations

from typing import Any

from integrations.scripted import reply_bias
from requirements_guard import need

ENV_ID = "ALFWorld-Rubric-v0"
REPLIES = ("<think>x</think><action>look</action>", "<think>x</think><action>inventory</action>")


def need_trl_stack() -> None:
    for module in ("trl", "peft", "datasets"):
        need(module, "pip install 'rubricgym[trl]'")
    for module in ("textworld", "alfworld"):
        need(module, "pip install 'rubricgym[alfworld]'")


def make_trainer(tmp_path: Any, dataset: Any = None, estimator: str = "trca", groups: int = 2, judge: Any = None,
                 per_device: int | None = None) -> Any:
    """``groups`` prompt rows (seeds 0..groups-1) of G=2; each process's batch holds
    ``per_device`` rows (default: all ``2 * groups``)."""
    from peft import LoraConfig
    from trl import GRPOConfig

    from rubricgym.integrations.trl import RubricGRPOTrainer, rubricgym_dataset, rubricgym_rollout_func
    from rubricgym.models import load_causal_lm

    model, tokenizer = load_causal_lm("tiny", device="cpu", seed=0)
    config = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=per_device or 2 * groups, num_generations=2, max_steps=1,
        max_completion_length=1024, learning_rate=1e-2, beta=0.0, loss_type="dapo", mask_truncated_completions=False,
        use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=1, seed=0,
        gradient_checkpointing=False,
        generation_kwargs=reply_bias(tokenizer, REPLIES),
    )
    return RubricGRPOTrainer(
        model=model, args=config, processing_class=tokenizer, estimator=estimator, judge=judge,
        train_dataset=dataset if dataset is not None else rubricgym_dataset(ENV_ID, seeds=range(groups)),
        rollout_func=rubricgym_rollout_func(ENV_ID, max_steps=3, max_new_tokens=48),
        peft_config=LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, task_type="CAUSAL_LM",
                               target_modules=["q_proj", "v_proj"]),
    )
