r"""Reading YAML files (run configs, operator libraries, rubrics): one reader with bounds.

``yaml.safe_load`` builds no objects, but it recurses: a file nested a few thousand levels
deep ends in ``RecursionError``, and a special file (``/dev/zero``) is read forever. It also
expands anchors and aliases: PyYAML shares an alias's node, so a few hundred bytes of nested
aliases (a "billion laughs") parse quickly into a value whose walk (a depth check, a
validation) takes minutes. Here a file is read with a byte cap, anchors and aliases are
refused while parsing (no config, library or rubric needs them), nesting is capped, and every
problem is a ``YamlFileError`` (a ``ValueError``) that names the file and, where YAML knows
it, the line.

>>> parse_yaml("a: [1, 2]", "inline")
{'a': [1, 2]}
>>> parse_yaml("a: " + "[" * 200 + "]" * 200, "deep.yaml")
Traceback (most recent call last):
...
rubricgym.yaml_files.YamlFileError: deep.yaml: nested deeper than 64 levels
>>> parse_yaml("a: &x [1]\nb: *x", "alias.yaml")
Traceback (most recent call last):
...
rubricgym.yaml_files.YamlFileError: alias.yaml: YAML anchors and aliases are not accepted (line 1: anchor &x)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_YAML_BYTES", "MAX_YAML_DEPTH", "YamlFileError", "nesting_depth", "parse_yaml", "read_yaml_file"]

MAX_YAML_BYTES = 16 * 1024 * 1024
"""The largest YAML file read (16 MiB): far above any config, library or rubric."""
MAX_YAML_DEPTH = 64
"""The deepest nesting accepted: configs, libraries and rubrics are a few levels deep."""


class YamlFileError(ValueError):
    """A YAML file (or text) cannot be read; the message starts with where it came from."""


class _RefusedAlias(yaml.YAMLError):
    def __init__(self, what: str, mark: Any):
        super().__init__(what)
        self.what, self.mark = what, mark


class _PlainLoader(yaml.SafeLoader):
    """The safe loader, refusing anchors and aliases when it composes each node (before any
    value is built, so nothing shared is ever expanded)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _RefusedAlias(f"alias *{event.anchor}", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise _RefusedAlias(f"anchor &{event.anchor}", event.start_mark)
        return super().compose_node(parent, index)


def nesting_depth(value: Any) -> int:
    """How deeply lists and mappings nest in ``value`` (a scalar is 0); iterative, so any
    depth is measured without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_yaml(text: str, where: str) -> Any:
    """The value of YAML ``text`` (safe loader: no tags, no objects, no anchors or aliases), or
    ``YamlFileError``."""
    try:
        value = yaml.load(text, Loader=_PlainLoader)  # noqa: S506 - a SafeLoader subclass
    except _RefusedAlias as exc:
        raise YamlFileError(f"{where}: YAML anchors and aliases are not accepted (line {exc.mark.line + 1}: "
                            f"{exc.what})") from None
    except RecursionError:
        raise YamlFileError(f"{where}: nested deeper than {MAX_YAML_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlFileError(f"{where}: not valid YAML{line}: {problem}") from None
    if nesting_depth(value) > MAX_YAML_DEPTH:
        raise YamlFileError(f"{where}: nested deeper than {MAX_YAML_DEPTH} levels")
    return value


def read_yaml_file(path: str | Path) -> Any:
    """The value of the YAML file ``path``: a bounded read (a special file with no end is an
    error too), UTF-8 text, then ``parse_yaml``. ``OSError`` is left to the caller."""
    path = Path(path)
    with open(path, "rb") as fh:
        data = fh.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise YamlFileError(f"{path}: larger than {MAX_YAML_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_yaml(text, str(path))
