"""Make TRL's own sampling write a given reply: a tiny random model never writes a parsable
action, so the tests steer it through TRL's ``generation_kwargs`` (transformers'
``sequence_bias``), leaving the model, TRL's generation and the env real."""

from __future__ import annotations

from typing import Any


def reply_bias(tokenizer: Any, reply: str, bias: float = 100.0) -> dict[str, Any]:
    """``generation_kwargs`` under which every assistant turn is ``reply`` then the stop token:
    each bias fires only after the assistant header and the reply's earlier tokens."""
    header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    target = tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return {"sequence_bias": [[list(header) + target[: i + 1], bias] for i in range(len(target))]}
