"""Split an agent response into reasoning and one executable action.

Malformed responses are a normal, scored event (an Invalidity fact), so parsing never
raises: every input string maps to a ``ParsedAction`` with ``ok`` or a ``ParseError``.
The scan is linear in the response length (no backtracking patterns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rubricgym.contract import ParsedAction, ParseError

__all__ = ["ACTION_GRAMMAR", "ExpertAction", "TagGrammar", "parse_response"]


@dataclass(frozen=True)
class ExpertAction:
    """One action of a scripted (expert) player: its text and which action tag carries it
    (``None``: the grammar's first tag)."""

    content: str
    kind: str | None = None

    @classmethod
    def of(cls, action: str | ExpertAction) -> ExpertAction:
        """An expert's step as an ``ExpertAction`` (experts may return plain command strings)."""
        return action if isinstance(action, ExpertAction) else cls(str(action))


@dataclass(frozen=True)
class TagGrammar:
    """Which tags hold the action and the reasoning, and how to treat several actions.

    ``on_multiple="reject"`` makes two action blocks a failure (the default ``<action>``
    protocol); ``"first"`` lets the first block decide (the Search-R1 protocol).
    ``fence_kind`` set (e.g. "python") also accepts a Markdown code fence as an action block
    of that kind (coding benchmarks); a fence inside an action tag stays in its content.
    """

    action_tags: tuple[str, ...] = ("action",)
    reasoning_tag: str | None = "think"
    on_multiple: str = "reject"
    max_chars: int = 32_768
    fence_kind: str | None = None
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.on_multiple not in ("reject", "first"):
            raise ValueError("on_multiple must be 'reject' or 'first'")
        if not self.action_tags:
            raise ValueError("a grammar needs at least one action tag")
        names = "|".join(re.escape(t) for t in self.action_tags)
        object.__setattr__(self, "_pattern", re.compile(rf"<(/?)({names})\s*>", re.IGNORECASE))

    def tokens(self, text: str) -> list[tuple[bool, str, int, int]]:
        """Opening/closing action delimiters in order: ``(closing, kind, start, end)``."""
        found = [(m.start(), m.end(), m.group(1) == "/", m.group(2).lower()) for m in self._pattern.finditer(text)]
        if self.fence_kind is None:
            return [(closing, kind, start, end) for start, end, closing, kind in found]
        fences = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
        out: list[tuple[bool, str, int, int]] = []
        in_tag = in_fence = False
        for start, end, *tag in sorted([(s, e, c, k) for s, e, c, k in found] + [(s, e) for s, e in fences]):
            if tag:  # an action tag; ignored inside a fence
                if not in_fence:
                    in_tag = not tag[0]
                    out.append((tag[0], tag[1], start, end))
            elif not in_tag:  # a fence outside any tag: alternately opens and closes
                out.append((in_fence, self.fence_kind, start, start + 3 if in_fence else end))
                in_fence = not in_fence
        return out

    def render(self, action: str | ExpertAction, reasoning: str = "following the plan") -> str:
        """An action as a full response in this grammar (the inverse of ``parse_response``).

        >>> ACTION_GRAMMAR.render("look", reasoning="hm")
        '<think>hm</think><action>look</action>'
        """
        act = ExpertAction.of(action)
        kind = act.kind or self.action_tags[0]
        think = f"<{self.reasoning_tag}>{reasoning}</{self.reasoning_tag}>" if self.reasoning_tag else ""
        return f"{think}<{kind}>{act.content}</{kind}>"

    def instruction(self) -> str:
        """The format instruction shown to the agent."""
        tags = " or ".join(f"<{t}>...</{t}>" for t in self.action_tags)
        if self.fence_kind:
            tags += f" or one ```{self.fence_kind} ...``` block"
        think = f"<{self.reasoning_tag}>...</{self.reasoning_tag}> then " if self.reasoning_tag else ""
        return f"Reply with {think}exactly one {tags}."


ACTION_GRAMMAR = TagGrammar()
_FENCE = re.compile(r"```[ \t]*(?:[A-Za-z0-9_+-]*)[ \t]*\n?")


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
    for closing, kind, t_start, t_end in grammar.tokens(text):
        if open_kind is None:
            if not closing:
                open_kind, open_end = kind, t_end
        elif closing and kind == open_kind:
            blocks.append((kind, open_end, t_start))
            open_kind = None
    if open_kind is not None:
        unclosed = True

    if not blocks:
        first_tag = bool(grammar.tokens(text))
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
