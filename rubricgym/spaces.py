"""A Gymnasium text space that accepts any Unicode string up to a length."""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["PRINTABLE", "UnicodeText"]

PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " \n"


class UnicodeText(spaces.Text):
    """Like ``spaces.Text`` but membership admits any characters (observations and agent
    responses are free text); sampling draws from printable ASCII."""

    def __init__(self, max_length: int, seed: int | np.random.Generator | None = None):
        super().__init__(max_length=max_length, min_length=0, charset=PRINTABLE, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"
