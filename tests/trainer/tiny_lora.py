"""A tiny random model with a fresh LoRA adapter: the update tests' policy."""

from __future__ import annotations

from typing import Any

import torch
from peft import LoraConfig, get_peft_model

from rubricgym.models import build_tiny_model


def lora_tiny(seed: int = 0) -> tuple[Any, Any]:
    model, tok = build_tiny_model(seed)
    torch.manual_seed(seed)  # LoRA's A matrices are drawn from the global generator
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            task_type="CAUSAL_LM"))
    return peft, tok
