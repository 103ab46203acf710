"""Facts read from AppWorld's execution output. Every pattern is linear and time-bounded."""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

MAX_SCAN_CHARS = 200_000
REGEX_TIMEOUT_S = 0.5

_EXCEPTION_LINE = regex.compile(
    r"^((?:[A-Za-z_][\w.]{0,100}?)?(?:Error|Exception|Exit|Interrupt|Warning|Iteration))(?::|$)"
)
_API_ERROR = regex.compile(r"Response status code is (\d{3})")
_API_MESSAGE = regex.compile(r'"message"\s*:\s*"([^"\n]{0,300})"')
_ENTITY_ID = regex.compile(r"""["']([a-z][a-z_]{0,40}_id)["']\s*:\s*(\d{1,12})\b""")
_EMAIL = regex.compile(r"\b[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,4}\b")
_PASSWORD = regex.compile(r"""["']password["']\s*:\s*["'][^"'\n]{1,200}["']""")
_TOKEN = regex.compile(r"""(?:["']access_token["']\s*:\s*["'][^"'\n]{8,}["'])|\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{4,}""")
_CARD = regex.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_CARD_FIELD = regex.compile(r"""["'](?:card_number|cvv|cvc)["']\s*:\s*["']?\d{3,19}""")


@dataclass
class OutputAnalysis:
    execution_failed: bool = False
    timed_out: bool = False
    exception_type: str | None = None
    api_error: bool = False
    api_error_codes: list[int] = field(default_factory=list)
    api_error_messages: list[str] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)
    emails: list[str] = field(default_factory=list)
    secret_kinds: list[str] = field(default_factory=list)
    printed: bool = False


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _findall(pattern: regex.Pattern[str], text: str) -> list:
    try:
        return pattern.findall(text, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        return []


def analyze_output(output: str) -> OutputAnalysis:
    text = output[:MAX_SCAN_CHARS]
    result = OutputAnalysis()
    stripped = text.strip()
    result.printed = bool(stripped) and stripped not in ("Execution successful.", "No code available to execute.")
    if stripped.startswith("Execution failed"):
        result.execution_failed = True
        result.timed_out = "Execution timed out" in text
        for line in reversed(stripped.splitlines()[-40:]):
            m = _EXCEPTION_LINE.match(line.strip())
            if m:
                result.exception_type = m.group(1).rsplit(".", 1)[-1]
                break
        if result.exception_type is None:
            result.exception_type = "SyntaxError" if "Syntax error" in text else "ExecutionError"
        codes = [int(c) for c in _findall(_API_ERROR, text)]
        if codes:
            result.api_error = True
            result.api_error_codes = sorted(set(codes))
            result.api_error_messages = list(dict.fromkeys(_findall(_API_MESSAGE, text)))[:5]
    result.entity_ids = list(dict.fromkeys(f"{k}:{v}" for k, v in _findall(_ENTITY_ID, text)))
    result.emails = list(dict.fromkeys(e.lower() for e in _findall(_EMAIL, text)))
    kinds = []
    if _findall(_PASSWORD, text):
        kinds.append("password")
    if _findall(_TOKEN, text):
        kinds.append("access_token")
    if _findall(_CARD_FIELD, text) or any(_luhn(regex.sub(r"\D", "", c)) for c in _findall(_CARD, text)):
        kinds.append("card_number")
    result.secret_kinds = kinds
    return result
