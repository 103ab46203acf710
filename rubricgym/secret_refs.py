"""Secrets are referenced, never written: a config names the environment variable (or the
file) that holds a key, and the key is read only when a connection is made.

Configs, overrides and settings end up in run folders (``config.yaml``, checkpoints), so a
key given there as a value would reach disk; ``refuse_inline_secrets`` rejects that with a
message saying how to pass the key instead. Used by the judge settings and the trainer's
config; any future credential (a user simulator's key, say) follows the same rule.

A key can still come back in a reply (a server that echoes it). Every value ``read_secret``
returns is remembered in this process (in memory only), and ``redact`` / ``redact_json``
replace it with ``REDACTED`` in whatever is written: the judge cache, tau-bench user
replies, run files, logs and CLI error messages.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from types import TracebackType
from urllib.parse import quote, urlsplit

from pydantic import SecretStr

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

__all__ = ["InlineSecretError", "KEY_PREFIXES", "MAX_KEY_FILE_BYTES", "MIN_REDACTED_CHARS", "REDACTED", "REFERENCE_SUFFIXES",
           "RedactingFilter", "SECRET_NAMES", "how_to_pass", "install_log_redaction", "read_secret", "redact",
           "redact_json", "refuse_inline_secrets", "remember_secret"]

#: setting names that would hold a secret itself (compared lower-case, '-' as '_')
SECRET_NAMES = frozenset({
    "api_key", "apikey", "key", "secret", "secret_key", "token", "access_token", "api_token", "auth_token",
    "password", "passwd", "authorization", "bearer", "client_secret", "private_key",
})
#: prefixes of well-known provider keys; such a string is a key wherever it appears
KEY_PREFIXES = ("sk-", "sk_live_", "sk_test_", "sk-ant-", "sk-proj-", "xai-", "gsk_", "hf_", "ghp_", "github_pat_",
                "AKIA", "AIza")
#: settings that hold a *reference* to a secret (a variable name, a path): allowed
REFERENCE_SUFFIXES = ("_env", "_file")
MAX_KEY_FILE_BYTES = 16 * 1024
#: what a remembered secret is replaced with in everything written
REDACTED = "<redacted secret>"
#: shorter values are not remembered: redacting them would cut common words out of text
MIN_REDACTED_CHARS = 8


class InlineSecretError(ValueError):
    """A secret was given as a config value."""


def how_to_pass(prefix: str = "") -> str:
    return (f"put the key in an environment variable and set {prefix}api_key_env: VARIABLE_NAME "
            f"(default OPENAI_API_KEY), or in a file only you can read and set {prefix}api_key_file: PATH")


def _looks_like_key(value: str) -> bool:
    text = value.strip()
    return len(text) >= 16 and " " not in text and text.startswith(KEY_PREFIXES)


def refuse_inline_secrets(data: Any, where: str, prefix: str = "") -> None:
    """Raise ``InlineSecretError`` when ``data`` (a mapping, possibly nested) holds a secret
    by name (``api_key: ...``) or by shape (a string that looks like a provider key). The
    message names the setting, never its value."""
    _walk(data, where, prefix, depth=0)


def _walk(data: Any, where: str, prefix: str, depth: int) -> None:
    if depth > 32:
        raise InlineSecretError(f"{where}: settings nested more than 32 levels deep")
    if isinstance(data, Mapping):
        for raw_key, value in data.items():
            name = str(raw_key).strip().lower().replace("-", "_")
            path = f"{where}.{raw_key}"
            if name.endswith(REFERENCE_SUFFIXES):
                _check_reference(path, name, value, prefix)
                continue
            if name in SECRET_NAMES and value not in (None, ""):
                raise InlineSecretError(
                    f"{path}: keys are never accepted as config values (configs are written to run folders); "
                    + how_to_pass(prefix))
            _walk(value, path, prefix, depth + 1)
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            _walk(value, f"{where}[{i}]", prefix, depth + 1)
    elif isinstance(data, str) and _looks_like_key(data):
        raise InlineSecretError(f"{where}: this value looks like an API key; keys are never accepted as config "
                                "values (configs are written to run folders); " + how_to_pass(prefix))
    elif isinstance(data, str) and _url_credentials(data):
        raise InlineSecretError(f"{where}: this URL carries credentials (user:password@host); they would be written "
                                "to the run folder: remove them from the URL and " + how_to_pass(prefix))


def _url_credentials(text: str) -> bool:
    """Whether ``text`` is a URL with user-info (``scheme://user:secret@host``)."""
    if "://" not in text or "@" not in text:
        return False
    try:
        parts = urlsplit(text.strip())
    except ValueError:
        return False
    return bool(parts.netloc) and (parts.username is not None or parts.password is not None)


def _check_reference(path: str, name: str, value: Any, prefix: str) -> None:
    """A ``*_env`` setting holds a variable's NAME, a ``*_file`` setting a path: a key given
    there by mistake (``api_key_env: sk-...``) would be written to the run folder too."""
    if not isinstance(value, str) or not value:
        return
    if _looks_like_key(value) or (name.endswith("_env") and not ENV_NAME.fullmatch(value)):
        raise InlineSecretError(
            f"{path}: expects the name of an environment variable (or a file path), and this value is not one "
            "(it looks like a key itself); " + how_to_pass(prefix))


def read_secret(env: str | None = None, file: str | os.PathLike[str] | None = None,
                fallback_env: tuple[str, ...] = ()) -> SecretStr | None:
    """The secret from ``file`` (first line, stripped) or else the variable ``env`` (then
    ``fallback_env``); ``None`` when none is set. Read at use time, never stored in a
    config object."""
    if file:
        path = Path(file).expanduser()
        try:  # a bounded read: a special file (/dev/zero, a pipe) reports no size, or a wrong one
            with open(path, "rb") as fh:
                data = fh.read(MAX_KEY_FILE_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the key file ({exc.strerror or exc})") from None
        if len(data) > MAX_KEY_FILE_BYTES:
            raise ValueError(f"{path}: a key file must be under {MAX_KEY_FILE_BYTES} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{path}: the key file is not UTF-8 text") from None
        lines = text.strip().splitlines()
        return _remembered(lines[0].strip()) if lines and lines[0].strip() else None
    for name in ((env,) if env else ()) + tuple(fallback_env):
        value = os.environ.get(name, "")
        if value.strip():
            return _remembered(value.strip())
    return None


# --- redaction: a secret this process has read never leaves it in written text -------------

_lock = threading.Lock()
_forms: tuple[str, ...] = ()  # every remembered value and its JSON-escaped forms
_pieces: tuple[str, ...] = ()  # every MIN_REDACTED_CHARS-long piece of every form
_values: set[str] = set()


def _remembered(value: str) -> SecretStr:
    remember_secret(value)
    return SecretStr(value)


def remember_secret(value: str) -> None:
    """Add ``value`` to this process's redaction set (kept in memory only, never written).
    ``read_secret`` calls it for every key it returns; values under ``MIN_REDACTED_CHARS``
    characters are ignored."""
    global _forms, _pieces
    if len(value) < MIN_REDACTED_CHARS:
        return
    with _lock:
        if value in _values:
            return
        _values.add(value)
        forms = set(_forms) | set(encoded_forms(value))
        pieces = set(_pieces) | {f[k:k + MIN_REDACTED_CHARS] for f in encoded_forms(value)
                                 for k in range(len(f) - MIN_REDACTED_CHARS + 1)}
        _forms, _pieces = tuple(sorted(forms)), tuple(sorted(pieces))


def encoded_forms(value: str) -> list[str]:
    """How a key shows up in text it was echoed into: as it is, escaped inside a JSON string
    (quotes, backslashes, non-ASCII), percent-encoded in a URL or form body, and in base64
    (standard and URL-safe, with and without padding: a server that echoes a basic-auth header
    or an encoded token)."""
    raw = value.encode("utf-8")
    b64 = base64.b64encode(raw).decode("ascii")
    urlsafe = base64.urlsafe_b64encode(raw).decode("ascii")
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], quote(value, safe=""),
             quote(value, safe="/"), b64, b64.rstrip("="), urlsafe, urlsafe.rstrip("=")}
    return sorted(f for f in forms if len(f) >= MIN_REDACTED_CHARS)


def redact(text: str) -> str:
    """``text`` with every remembered secret, and every piece of one that is at least
    ``MIN_REDACTED_CHARS`` long, replaced by ``REDACTED`` — wherever it stands: a whole key,
    a key cut by truncation, a key split in two and echoed in pieces. Every occurrence of every
    ``MIN_REDACTED_CHARS``-long piece is found first (a longer piece is a chain of overlapping
    ones) and overlapping or touching occurrences become one marker, so no part of a secret that
    long survives. The price: text that happens to hold such a piece of a key is hidden too.
    ``str.find`` over a small set: no pattern built from secret text. Idempotent for secrets
    that share no such piece with the marker."""
    pieces = _pieces  # one consistent snapshot (the tuple is replaced, never changed)
    if not pieces or not isinstance(text, str):
        return text
    spans: list[tuple[int, int]] = []
    for piece in pieces:
        start = text.find(piece)
        while start != -1:
            spans.append((start, start + len(piece)))
            start = text.find(piece, start + 1)
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    kept = 0  # text[kept:] is not yet copied
    begin, end = spans[0]
    for s, e in spans[1:]:
        if s <= end:
            end = max(end, e)
            continue
        out += [text[kept:begin], REDACTED]
        kept, (begin, end) = end, (s, e)
    out += [text[kept:begin], REDACTED, text[end:]]
    return "".join(out)


def redact_json(obj: Any) -> Any:
    """``obj`` (nested dicts, lists, tuples, strings) with ``redact`` applied to every string,
    keys included; other values are returned as they are."""
    if not _forms:
        return obj
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {redact_json(k): redact_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_json(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_json(v) for v in obj)
    return obj


class RedactingFilter(logging.Filter):
    """A handler filter: the record's message, traceback and stack text go out redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _forms:
            return True
        try:
            message = record.getMessage()
        except Exception:  # bad arguments: left to the handler, which reports them
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def _redacting_excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))


def _redacting_thread_hook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is not SystemExit and args.exc_value is not None:
        name = args.thread.name if args.thread is not None else "?"
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        sys.stderr.write(redact(f"Exception in thread {name}:\n{text}"))


def install_log_redaction() -> None:
    """Put a ``RedactingFilter`` on every handler of the root logger and on ``logging``'s
    last-resort handler (used when nothing is configured), and redact the tracebacks of
    uncaught exceptions (``sys.excepthook``, ``threading.excepthook``: stderr is often a log
    file). Handlers filter every record they emit, whichever logger it came from; call again
    after adding handlers."""
    sys.excepthook = _redacting_excepthook
    threading.excepthook = _redacting_thread_hook
    handlers = list(logging.getLogger().handlers)
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
