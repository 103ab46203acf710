"""A deterministic cost bound of a CEL condition, computed from its text alone.

CEL has no loops or recursion: the only repetition is a comprehension macro (``all``,
``exists``, ``exists_one``, ``map``, ``filter``), and each nested one multiplies the work by
the length of the list it walks (measured: ~10x per level with ALFWorld-sized lists; a
depth-7 condition costs seconds per step). So the bound is

    bound = nodes * ASSUMED_LIST_LENGTH ** comprehension_depth

with ``nodes`` the number of operands and operators in the expression. The validator
rejects a condition over ``MAX_BOUND`` (and over ``MAX_DEPTH`` / ``MAX_NODES`` /
``MAX_CHARS`` outright), never by timing it: the same text always gets the same verdict.
Lists that are longer at run time than assumed are caught by the judge's per-step budget
(``rubricgym.trca.operators``).

The scan is one left-to-right pass over the characters (no regular expressions), so its
own cost is linear in the length of the condition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})
ROOTS = frozenset({"facts", "binding", "coverage"})
ASSUMED_LIST_LENGTH = 10
MAX_DEPTH = 3
MAX_NODES = 500
MAX_CHARS = 4000
MAX_BOUND = 100_000

_OPERATORS = ("&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "?")


@dataclass(frozen=True)
class ConditionCost:
    """What the bound is made of; ``problems`` says why a condition is refused (if it is)."""

    chars: int
    nodes: int
    comprehension_depth: int
    bound: int
    bound_variables: frozenset[str] = field(default_factory=frozenset)

    @property
    def problems(self) -> list[tuple[str, str]]:
        """``(kind, message)`` pairs: ``cost`` for a bound exceeded, ``shadowed_root`` for a
        comprehension variable named like a root (it would hide ``facts``/``binding``/``coverage``)."""
        out: list[tuple[str, str]] = []
        if self.chars > MAX_CHARS:
            out.append(("cost", f"condition is {self.chars} characters long (at most {MAX_CHARS})"))
        if self.comprehension_depth > MAX_DEPTH:
            out.append(("cost", f"comprehensions nested {self.comprehension_depth} deep (at most {MAX_DEPTH}): "
                                f"each level multiplies the work by the list length"))
        if self.nodes > MAX_NODES:
            out.append(("cost", f"{self.nodes} expression nodes (at most {MAX_NODES})"))
        if self.bound > MAX_BOUND and not out:
            out.append(("cost", f"cost bound {self.bound:,} = {self.nodes} nodes x {ASSUMED_LIST_LENGTH}^"
                                f"{self.comprehension_depth} is over {MAX_BOUND:,}"))
        for name in sorted(self.bound_variables & ROOTS):
            out.append(("shadowed_root", f"comprehension variable {name!r} hides the root {name}; rename it"))
        return out


def _skip_string(text: str, i: int) -> int:
    """Index just past the string literal starting at ``i`` (prefix letters included)."""
    n = len(text)
    raw = False
    while i < n and text[i] in "rRbB":
        raw = raw or text[i] in "rR"
        i += 1
    quote = text[i]
    triple = text.startswith(quote * 3, i)
    end_mark = quote * 3 if triple else quote
    i += len(end_mark)
    while i < n:
        if text[i] == "\\" and not raw:
            i += 2
            continue
        if text.startswith(end_mark, i):
            return i + len(end_mark)
        if text[i] == "\n" and not triple:
            return i  # unterminated: CEL's parser reports it; the scan just stops the literal
        i += 1
    return n


def condition_cost(condition: str) -> ConditionCost:
    """The cost bound of ``condition`` (linear scan; tolerant of text CEL would reject)."""
    text = condition
    n = len(text)
    nodes = depth = max_depth = 0
    frames: list[bool] = []  # one per open bracket: True when it opened a comprehension
    before, last = "", ""  # the two previous tokens, to recognise ``.exists(``
    bound: set[str] = set()
    expect_variable = False  # just after ``.exists(``: the next name is the bound variable
    i = 0
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        token = c
        if c in "\"'" or (c in "rRbB" and _starts_string(text, i)):
            i = _skip_string(text, i)
            nodes += 1
            token = '""'
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            token = text[i:j]
            k = j
            while k < n and text[k].isspace():
                k += 1
            if expect_variable and k < n and text[k] == ",":
                bound.add(token)
            nodes += 1
            i = j
        elif c.isdigit():
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "._"):
                j += 1
            nodes += 1
            token = "0"
            i = j
        elif c in "([{":
            macro = c == "(" and before == "." and last in COMPREHENSIONS
            frames.append(macro)
            if macro:
                depth += 1
                max_depth = max(max_depth, depth)
            elif c == "(" and last.isidentifier():
                nodes += 1  # a function call
            i += 1
        elif c in ")]}":
            if frames and frames.pop():
                depth -= 1
            i += 1
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is not None:
                nodes += 1
                token = op
            i += len(op) if op else 1
        expect_variable = token == "(" and frames[-1] if token == "(" else False
        before, last = last, token
    return ConditionCost(chars=n, nodes=nodes, comprehension_depth=max_depth,
                         bound=nodes * ASSUMED_LIST_LENGTH ** min(max_depth, 64),
                         bound_variables=frozenset(bound))


def _starts_string(text: str, i: int) -> bool:
    """A string literal with prefix letters (``r"..."``, ``b'...'``, ``rb"..."``) starts at ``i``."""
    j = i
    while j < len(text) and j - i < 2 and text[j] in "rRbB":
        j += 1
    return j < len(text) and text[j] in "\"'"
