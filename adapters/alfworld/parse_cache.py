"""TextWorld's parses, memoized: the same text is parsed once per process.

Loading an ALFWorld game parses the PDDL domain and each rule of the text grammar with tatsu
(the same texts for every game), and every step derives each admissible command from a
template parsed again. Measured on the bundled games' expert walkthroughs: 40-50% of the time
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

MAX_TEXTS = 8192  # per parser: the bundled games' grammar and command templates are ~1,000 texts
_PARSERS = ("textworld.envs.pddl.textgen", "textworld.envs.pddl.logic", "textworld.logic")
_ORIGINALS: dict[str, Callable[..., Any]] = {}


def memoized(parse: Callable[..., Any]) -> Callable[..., Any]:
    """``parse`` once per (text, rule) and a deep copy per call."""

    @functools.lru_cache(maxsize=MAX_TEXTS)
    def parsed(text: str, rule_name: str | None) -> Any:
        return parse(text, rule_name=rule_name) if rule_name is not None else parse(text)

    @functools.wraps(parse)
    def cached(text: Any, rule_name: str | None = None, **options: Any) -> Any:
        if not isinstance(text, str) or any(options.values()):  # e.g. trace=True: tatsu must run
            return parse(text, **({"rule_name": rule_name} if rule_name is not None else {}), **options)
        return copy.deepcopy(parsed(text, rule_name))

    cached.cache_info = parsed.cache_info  # type: ignore[attr-defined]
    return cached


def install() -> None:
    """Memoize TextWorld's three parsers in this process (idempotent)."""
    for name in _PARSERS:
        if name not in _ORIGINALS:
            module = importlib.import_module(name)
            _ORIGINALS[name] = module._parse_and_convert
            module._parse_and_convert = memoized(module._parse_and_convert)


def uninstall() -> None:
    """TextWorld's own parsers back (for comparing the two)."""
    for name, original in list(_ORIGINALS.items()):
        importlib.import_module(name)._parse_and_convert = original
        del _ORIGINALS[name]
