"""Split an agent response into reasoning and one executable action.

Malformed responses are a normal, scored event (an Invalidity fact), so parsing never
raises: every input string maps to a ``ParsedAction`` with ``ok`` or a ``ParseError``.
The scan is linear in the response length (no backtracking patterns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rubricgym.contract import ParsedAction, ParseError


@dataclass(frozen=True)
class TagGrammar:
    """Which tags hold the action and the reasoning, and how to treat several actions.

    ``on_multiple="reject"`` makes two action blocks a failure (the default ``<action>``
    protocol); ``"first"`` lets the first block decide (the Search-R1 protocol).
    """

    action_tags: tuple[str, ...] = ("action",)
    reasoning_tag: str | None = "think"
    on_multiple: str = "reject"
    max_chars: int = 32_768
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.on_multiple not in ("reject", "first"):
            raise ValueError("on_multiple must be 'reject' or 'first'")
        if not self.action_tags:
            raise ValueError("a grammar needs at least one action tag")
        names = "|".join(re.escape(t) for t in self.action_tags)
        object.__setattr__(self, "_pattern", re.compile(rf"<(/?)({names})\s*>", re.IGNORECASE))

    def instruction(self) -> str:
        """The format instruction shown to the agent."""
        tags = " or ".join(f"<{t}>...</{t}>" for t in self.action_tags)
        think = f"<{self.reasoning_tag}>...</{self.reasoning_tag}> then " if self.reasoning_tag else ""
        return f"Reply with {think}exactly one {tags}."


ACTION_GRAMMAR = TagGrammar()


def _fail(error: ParseError, detail: str, reasoning: tuple[str, tuple[int, int]] | None = None) -> ParsedAction:
    r_text, r_span = reasoning if reasoning else (None, None)
    return ParsedAction(ok=False, error=error, detail=detail, reasoning=r_text, reasoning_span=r_span)


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _find_reasoning(text: str, tag: str | None, before: int) -> tuple[str, tuple[int, int]] | None:
    if not tag:
        return None
    m = re.search(rf"<{re.escape(tag)}\s*>", text[:before], re.IGNORECASE)
    if not m:
        return None
    close = re.compile(rf"</{re.escape(tag)}\s*>", re.IGNORECASE).search(text, m.end(), before)
    if not close:
        return None
    s, e = _strip_span(text, m.end(), close.start())
    return text[s:e], (s, e)


def parse_response(text: object, grammar: TagGrammar = ACTION_GRAMMAR) -> ParsedAction:
    """Parse one response; never raises."""
    if not isinstance(text, str):
        return _fail(ParseError.INVALID_TEXT, f"response is {type(text).__name__}, not str")
    if len(text) > grammar.max_chars:
        return _fail(ParseError.TOO_LONG, f"{len(text)} characters > limit {grammar.max_chars}")
    if "\x00" in text:
        return _fail(ParseError.INVALID_TEXT, "response contains NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _fail(ParseError.INVALID_TEXT, "response contains unpaired surrogates")

    blocks: list[tuple[str, int, int]] = []  # (kind, content_start, content_end)
    open_kind: str | None = None
    open_end = 0
    unclosed = False
    for m in grammar._pattern.finditer(text):
        closing, kind = m.group(1) == "/", m.group(2).lower()
        if open_kind is None:
            if not closing:
                open_kind, open_end = kind, m.end()
        elif closing and kind == open_kind:
            blocks.append((kind, open_end, m.start()))
            open_kind = None
    if open_kind is not None:
        unclosed = True

    if not blocks:
        first_tag = grammar._pattern.search(text)
        reasoning = _find_reasoning(text, grammar.reasoning_tag, len(text))
        if unclosed or first_tag:
            return _fail(ParseError.UNCLOSED_TAG, "an action tag is opened but never closed", reasoning)
        return _fail(ParseError.MISSING_TAG, grammar.instruction(), reasoning)

    kind, start, end = blocks[0]
    reasoning = _find_reasoning(text, grammar.reasoning_tag, start)
    if len(blocks) > 1 and grammar.on_multiple == "reject":
        return _fail(ParseError.MULTIPLE_ACTIONS, f"{len(blocks)} action blocks; exactly one is allowed", reasoning)
    s, e = _strip_span(text, start, end)
    if s == e:
        return _fail(ParseError.EMPTY_ACTION, f"<{kind}> block is empty", reasoning)
    r_text, r_span = reasoning if reasoning else (None, None)
    return ParsedAction(
        ok=True, kind=kind, action=text[s:e], reasoning=r_text, reasoning_span=r_span, action_span=(s, e)
    )
