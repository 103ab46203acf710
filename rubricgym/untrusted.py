"""Untrusted text, normalized where it enters: an endpoint's reply, an env's observation, a
judge's reply, a tool call's arguments.

Text decoded from JSON can hold a lone surrogate (``"\\ud800"``): a code point that UTF-8 cannot
encode, so a record holding one cannot be written. ``clean_text`` replaces every surrogate
with U+FFFD (the replacement character) in one linear pass; ``clean_json`` does it for every
string of a JSON-like value, keys included.

>>> clean_text("ok \\ud800 then")
'ok \\ufffd then'
>>> clean_json({"a\\udfff": ["x", 1, "\\ud83d"]})
{'a\\ufffd': ['x', 1, '\\ufffd']}
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REPLACEMENT", "clean_json", "clean_text"]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")  # one character class: linear


def clean_text(text: str) -> str:
    """``text`` with every surrogate code point replaced by U+FFFD (the same object when it has none)."""
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def clean_json(value: Any) -> Any:
    """``clean_text`` on every string in nested dicts, lists and tuples (keys included)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_json(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(clean_json(v) for v in value)
    return value
