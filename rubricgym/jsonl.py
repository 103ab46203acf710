"""Reading JSON-lines files: one reader, errors that name ``file:line``, bounds that hold.

Every JSON-lines file rubricgym reads (trajectories, metrics logs, corpora, question sets)
goes through ``iter_json_lines``. A line is read with a byte cap, so a special file with
no newline (``/dev/zero``) or a damaged file with one huge line is an error naming the
line, never a ``MemoryError``. A bad line either raises ``JsonLinesError`` (``"raise"``,
for inputs that must be whole) or is reported in ``problems`` and skipped (``"skip"``, for
logs whose last line may be cut by a kill).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
>>> _ = path.write_text('{"a": 1}\\n\\nnot json\\n{"a": 2}\\n')
>>> problems = []
>>> [(n, row) for n, row in iter_json_lines(path, errors="skip", problems=problems)]
[(1, {'a': 1}), (4, {'a': 2})]
>>> problems
['rows.jsonl:3: not a JSON object (Expecting value at column 1), skipped']
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

__all__ = ["MAX_LINE_BYTES", "JsonLinesError", "iter_json_lines", "parse_json_line"]

MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest line read (256 MiB): far above any trajectory this package writes."""


class JsonLinesError(ValueError):
    """A line of a JSON-lines file cannot be read; the message starts with ``file:line``."""


def parse_json_line(text: str | bytes) -> Any:
    """One line's JSON value. Raises ``ValueError`` with a short reason (also for nesting
    too deep for the parser, which Python reports as ``RecursionError``)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at column {exc.colno}") from None


def iter_json_lines(
    path: str | Path,
    *,
    what: str = "a JSON object",
    errors: Literal["raise", "skip"] = "raise",
    problems: list[str] | None = None,
    objects_only: bool = True,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of ``path``.

    ``objects_only``: a value that is not a JSON object is a bad line. A bad line raises
    ``JsonLinesError("<path>:<line>: not <what>: <reason>")``, or with ``errors="skip"`` adds
    ``"<file name>:<line>: not <what> (<reason>), skipped"`` to ``problems``. An unreadable
    file raises ``OSError`` (with the path) in both modes."""
    path = Path(path)
    with open(path, "rb") as fh:
        number = 0
        while True:
            raw = fh.readline(max_line_bytes + 1)
            if not raw:
                return
            number += 1
            reason: str | None = None
            value: Any = None
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                # a line past the cap ends the reading: its rest may never end (/dev/zero)
                reason = f"line longer than {max_line_bytes} bytes"
                if errors == "raise":
                    raise JsonLinesError(f"{path}:{number}: not {what}: {reason}")
                if problems is not None:
                    problems.append(f"{path.name}:{number}: not {what} ({reason}); the rest of the file is not read")
                return
            elif not raw.strip():
                continue
            else:
                try:
                    value = parse_json_line(raw)
                except ValueError as exc:
                    reason = str(exc)
                else:
                    if objects_only and not isinstance(value, dict):
                        reason = f"expected a JSON object, got {type(value).__name__}"
            if reason is None:
                yield number, value
            elif errors == "raise":
                raise JsonLinesError(f"{path}:{number}: not {what}: {reason}")
            elif problems is not None:
                problems.append(f"{path.name}:{number}: not {what} ({reason}), skipped")
