"""TextWorld's parses, memoized: the same text is parsed once per process.

Every step derives each admissible command from a template that TextWorld parses again with
tatsu, and every game load parses the text-grammar rules again (the same ~100 texts across the
bundled games) and the game's PDDL domain (one text per game, parsed a second time by the
planner's own engine). Measured on the bundled games' expert walkthroughs: 40-50% of the time
of a reset and step. TextWorld routes these parses through one module-level
``_parse_and_convert`` each (text grammar, PDDL logic, game logic), a pure function of its
arguments, so each is replaced by one that parses a text once and hands every caller a deep
copy of the result: callers own what they get, as before (TextWorld sets a context on the
symbols it derives). Calls that ask tatsu to trace are passed through.
"""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Callable
from typing import Any

# texts kept per parser, least recently used dropped first: the 24 bundled training games give 104
# grammar texts and 8 logic texts; a PDDL domain is one large result per game, so only the games
# in play are kept (official ALFWorld has thousands)
MAX_TEXTS = {"textworld.envs.pddl.textgen": 8192, "textworld.envs.pddl.logic": 16, "textworld.logic": 8192}
_ORIGINALS: dict[str, Callable[..., Any]] = {}


def memoized(parse: Callable[..., Any], max_texts: int = 8192) -> Callable[..., Any]:
    """``parse`` once per (text, rule) and a deep copy per call."""

    def run(text: Any, rule_name: str | None, **options: Any) -> Any:
        # no rule named: the parser's own start rule, as a call without rule_name gets
        return parse(text, **({} if rule_name is None else {"rule_name": rule_name}), **options)

    parsed = functools.lru_cache(maxsize=max_texts)(run)

    @functools.wraps(parse)
    def cached(text: Any, rule_name: str | None = None, **options: Any) -> Any:
        if not isinstance(text, str) or any(options.values()):  # e.g. trace=True: tatsu must run
            return run(text, rule_name, **options)
        return copy.deepcopy(parsed(text, rule_name))

    cached.cache_info = parsed.cache_info  # type: ignore[attr-defined]
    return cached


def install() -> None:
    """Memoize TextWorld's three parsers in this process (idempotent)."""
    for name, max_texts in MAX_TEXTS.items():
        if name not in _ORIGINALS:
            module = importlib.import_module(name)
            _ORIGINALS[name] = module._parse_and_convert
            module._parse_and_convert = memoized(module._parse_and_convert, max_texts)


def uninstall() -> None:
    """TextWorld's own parsers back (for comparing the two)."""
    for name, original in list(_ORIGINALS.items()):
        importlib.import_module(name)._parse_and_convert = original
        del _ORIGINALS[name]
