"""Make TRL's own sampling write given replies: a tiny random model never writes a parsable
action, so the tests steer it through TRL's ``generation_kwargs`` (transformers'
``sequence_bias``), leaving the model, TRL's generation and the env real."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def reply_bias(tokenizer: Any, replies: Sequence[str], bias: float = 100.0) -> dict[str, Any]:
    """``generation_kwargs`` under which every assistant turn is one of ``replies`` then the
    stop token; where replies part, sampling picks among them. Each bias fires only after the
    assistant header and the reply's earlier tokens."""
    header = list(tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"])
    keys: set[tuple[int, ...]] = set()
    for reply in replies:
        target = list(tokenizer(reply, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
        keys.update(tuple(header + target[: i + 1]) for i in range(len(target)))
    return {"sequence_bias": [[list(key), bias] for key in sorted(keys)]}
