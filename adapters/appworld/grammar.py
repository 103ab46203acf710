"""Action grammar: one Python code block per step, as ``<action>...</action>`` or a fenced
```python block. A ``TagGrammar`` whose scanner also emits fence tokens, so the shared
``parse_response`` (spans, reasoning, multiple-block rejection) handles both forms."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from rubricgym.parsing import TagGrammar

_TAG = re.compile(r"<(/?)(action)\s*>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n?", re.IGNORECASE)
_FENCE_KIND = "python"


@dataclass(frozen=True)
class _Token:
    """Quacks like ``re.Match`` for what ``parse_response`` reads (group 1 '/', group 2 kind)."""

    closing: bool
    kind: str
    _start: int
    _end: int

    def group(self, index: int) -> str:
        return ("/" if self.closing else "") if index == 1 else self.kind

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end


class _CodeBlockScanner:
    """Tokens for ``<action>`` tags and Markdown fences, in order. Fences inside an
    ``<action>`` block are left in its content (the adapter strips them)."""

    def finditer(self, text: str) -> Iterator[_Token]:
        tokens: list[tuple[int, int, str, str]] = []
        for m in _TAG.finditer(text):
            tokens.append((m.start(), m.end(), "tag", m.group(1)))
        for m in _FENCE.finditer(text):
            tokens.append((m.start(), m.end(), "fence", m.group(1) or ""))
        tokens.sort()
        in_action = in_fence = False
        for start, end, kind, detail in tokens:
            if kind == "tag":
                if in_fence:
                    continue
                closing = detail == "/"
                in_action = not closing
                yield _Token(closing, "action", start, end)
            elif not in_action:
                if in_fence:  # a closing fence: the content ends at the backticks
                    in_fence = False
                    yield _Token(True, _FENCE_KIND, start, start + 3)
                else:
                    in_fence = True
                    yield _Token(False, _FENCE_KIND, start, end)

    def search(self, text: str) -> _Token | None:
        return next(iter(self.finditer(text)), None)


@dataclass(frozen=True)
class CodeBlockGrammar(TagGrammar):
    action_tags: tuple[str, ...] = ("action", _FENCE_KIND)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", _CodeBlockScanner())

    def instruction(self) -> str:
        return "Reply with exactly one Python code block: <action>...</action> or ```python ... ```."


CODE_GRAMMAR = CodeBlockGrammar()
_INNER_FENCE = re.compile(r"^\s*```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)\n?[ \t]*```\s*$", re.DOTALL | re.IGNORECASE)


def code_of(action: str) -> str:
    """The code to run: an action's content, without a fence wrapped inside ``<action>``."""
    m = _INNER_FENCE.match(action)
    return m.group(1) if m else action
