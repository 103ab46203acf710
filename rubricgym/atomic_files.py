"""Files replaced whole: readers see the previous file or the complete new one, never half."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rubricgym.secret_refs import redact

__all__ = ["atomic_write_json", "atomic_write_text"]


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None) -> Path:
    """Write ``text`` through a flushed temporary file beside ``path`` and ``os.replace``; no
    temporary file survives, whatever happens. ``mode``: permissions of the new file (the
    temporary file is private, 0600, otherwise). Keys read by this process are redacted
    (``rubricgym.secret_refs.redact``). Content cannot make it fail: a character UTF-8 cannot
    encode (a lone surrogate) is written as its backslash escape (in JSON text, the same
    character)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        if mode is not None:
            os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(redact(text))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def atomic_write_json(path: str | os.PathLike[str], data: object, indent: int = 2) -> Path:
    """``data`` as indented JSON with a final newline, replaced whole (``atomic_write_text``): a
    benchmark stopped while writing its result leaves the previous result, never half of one."""
    return atomic_write_text(path, json.dumps(data, indent=indent) + "\n")
