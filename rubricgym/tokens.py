"""From the parser's character spans to the exact token spans of a generated response
(the trainer's code, public for your own: ``response_token_spans``).

The policy's response is a list of token ids; the env sees ``decode(ids)``; the parser
reports reasoning/action as character spans of that text. Training needs the tokens: a
token belongs to a span when its characters overlap the span (so a token that straddles
``<action>`` and the command's first letters is in the action span - it carries both).

Fast path: re-encode the text with the tokenizer's offset mapping; it is valid only when
re-encoding gives back exactly the generated ids (the usual case). Otherwise (a sampled,
non-canonical tokenization) offsets come from decoding growing prefixes of the ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubricgym.contract import Span

__all__ = ["Span", "char_to_token_span", "decode_response", "response_token_spans", "token_char_offsets"]


def decode_response(tokenizer: Any, ids: Sequence[int]) -> str:
    """The text the env receives: special tokens (EOS, padding) dropped, no space clean-up."""
    return tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


def _prefix_offsets(tokenizer: Any, ids: Sequence[int], text: str) -> list[Span]:
    starts: list[int] = []
    for i in range(len(ids)):
        prefix = decode_response(tokenizer, ids[:i])
        # an incomplete UTF-8 sequence at the cut decodes to U+FFFD: drop it
        while prefix and not text.startswith(prefix):
            prefix = prefix[:-1]
        starts.append(len(prefix))
    ends = starts[1:] + [len(text)]
    return [(s, max(s, e)) for s, e in zip(starts, ends)]


def token_char_offsets(tokenizer: Any, ids: Sequence[int], text: str | None = None) -> list[Span]:
    """``[start, end)`` character range of each token of ``ids`` inside ``decode_response(ids)``.

    Special tokens get an empty range at their position.
    """
    ids = list(ids)
    if text is None:
        text = decode_response(tokenizer, ids)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    body = [i for i in ids if i not in special]
    if len(body) == len(ids):  # no specials inside: try the offset mapping
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if list(enc["input_ids"]) == ids:
            return [(int(s), int(e)) for s, e in enc["offset_mapping"]]
    return _prefix_offsets(tokenizer, ids, text)


def char_to_token_span(offsets: Sequence[Span], span: Span | None) -> Span | None:
    """The smallest token range covering every token whose characters overlap ``span``."""
    if span is None:
        return None
    lo, hi = span
    hit = [k for k, (s, e) in enumerate(offsets) if s < hi and e > lo and e > s]
    if not hit:
        return None
    return hit[0], hit[-1] + 1


def response_token_spans(tokenizer: Any, ids: Sequence[int], text: str, reasoning_span: Span | None,
                         action_span: Span | None) -> tuple[Span | None, Span | None]:
    """(reasoning tokens, action tokens) of a response, from the parser's character spans."""
    offsets = token_char_offsets(tokenizer, ids, text)
    return char_to_token_span(offsets, reasoning_span), char_to_token_span(offsets, action_span)
