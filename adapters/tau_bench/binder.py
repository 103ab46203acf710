"""Task binder: a tau2 user scenario -> ``TauBenchBinding`` (deterministic, no model).

tau2 tasks (``tasks.json`` of the retail/airline/telecom domains) carry
``user_scenario.instructions`` with ``domain``, ``reason_for_call``, ``known_info``,
``unknown_info`` and ``task_instructions`` (older tau-bench tasks: one ``instruction``
string). Intents are read from the reason for the call when it is given (else the whole
text); entities from every field. ``evaluation_criteria`` (the gold actions) is never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import regex

from rubricgym.adapters.tau_bench.facts import TauBenchBinding

MAX_CHARS = 8000  # scenarios are a paragraph; longer input is cut
_T = 0.5  # regex timeout (seconds) on scenario text
SCENARIO_FIELDS = ("reason_for_call", "known_info", "unknown_info", "task_instructions")
DOMAINS = ("retail", "airline", "telecom", "mock")

INTENT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("cancel", r"\bcancel"),
    ("return", r"\breturn(?:s|ing|ed)?\b(?!\s+(?:flight|trip))"),
    ("exchange", r"\bexchang"),
    ("book", r"\bbook(?:s|ing|ed)?\b|\bmake\s+(?:a\s+)?(?:new\s+)?reservation"),
    ("modify", r"\b(?:modify|modif|change|switch(?:ing)?\s+(?:to|my|the|your|it)\b|upgrade|downgrade|add\s+(?:a\s+)?(?:checked\s+)?bag|add\s+(?:a\s+)?passenger)"),
    ("update", r"\bupdate"),
    ("refund", r"\brefund"),
    ("compensation", r"\bcompensat|\bcertificate\b"),
    ("troubleshoot", r"\b(?:not\s+working|no\s+(?:service|signal|internet)|mobile\s+data|troubleshoot|can(?:'|no)t\s+(?:connect|send|make))"),
    ("inquire", r"\b(?:know|ask|inquir|find\s+out|check\s+(?:the|on|if|whether|status)|status|track|how\s+many|what\s+is)"),
)
_INTENTS = [(name, regex.compile(p)) for name, p in INTENT_PATTERNS]
_ORDER = regex.compile(r"#W\d{7}\b")
_USER_ID = regex.compile(r"\b[a-z]{2,20}_[a-z]{2,20}_\d{4}\b")
_RES_CONTEXT = regex.compile(r"\breservation(?:\s+(?:id|number|code))?(?:\s+(?:is|of|was))?\s*:?\s*([A-Z0-9]{6})\b")
_RES_CODE = regex.compile(r"(?<![\w#@.-])(?=[A-Z0-9]*[0-9])(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}(?![\w@-])")
_FLIGHT = regex.compile(r"\b[A-Z]{3}\d{3}\b")
_EMAIL = regex.compile(r"\b[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,4}\b")
_CUSTOMER = regex.compile(r"\bC\d{4,8}\b")
_LINE = regex.compile(r"\bL\d{4,8}\b")
_ZIP = regex.compile(r"\bzip(?:\s*code)?(?:\s+(?:is|of))?\s*:?\s*(\d{5})\b", regex.IGNORECASE)
_PHONE = regex.compile(r"(?<!\d)(?:\+?1[\s-]?)?\(?\d{3}\)?[\s-]\d{3}-\d{4}(?!\d)")
_NAME = regex.compile(r"\b(?:[Yy]ou\s+are|[Yy]our\s+name\s+is|[Mm]y\s+name\s+is|[Nn]ame:)\s+([A-Z][a-z]{1,20}(?:\s+[A-Z][a-z]{1,20}){1,2})\b")
_QUOTED = regex.compile(r"\"([^\"\n]{1,120})\"|'([^'\n]{2,120})'(?![a-z])")
_WS = regex.compile(r"\s+")


def scenario_text(task: str | Mapping[str, Any]) -> tuple[str, str, str]:
    """(domain, intent text, full text) from a tau2 task, its user_scenario, its instructions, or plain text."""
    if isinstance(task, str):
        return "", task[:MAX_CHARS], task[:MAX_CHARS]
    node: Any = task
    if isinstance(node, Mapping) and isinstance(node.get("user_scenario"), Mapping):
        node = node["user_scenario"]
    if isinstance(node, Mapping) and "instructions" in node:
        node = node["instructions"]
    elif isinstance(node, Mapping) and "instruction" in node:
        node = node["instruction"]
    if isinstance(node, str):
        return "", node[:MAX_CHARS], node[:MAX_CHARS]
    if not isinstance(node, Mapping):
        return "", "", ""
    domain = str(node.get("domain") or "").lower()
    parts = [str(node[f]) for f in SCENARIO_FIELDS if node.get(f)]
    full = "\n".join(parts)[:MAX_CHARS]
    reason = str(node.get("reason_for_call") or "")[:MAX_CHARS] or full
    return (domain if domain in DOMAINS else ""), reason, full


def _all(pattern: regex.Pattern[str], text: str, group: int = 0) -> list[str]:
    return list(dict.fromkeys(m.group(group) for m in pattern.finditer(text, timeout=_T)))


def _intents(text: str) -> list[str]:
    lower = text.lower()
    firsts = [(m.start(), name) for name, p in _INTENTS if (m := p.search(lower, timeout=_T))]
    return [name for _, name in sorted(firsts)]


def bind_task(task: str | Mapping[str, Any]) -> TauBenchBinding:
    """Parse a tau2 user scenario into its binding; never raises on text or odd mappings."""
    domain, reason, full = scenario_text(task)
    reason, full = _WS.sub(" ", reason), _WS.sub(" ", full)
    try:
        intents = _intents(reason) or _intents(full)
        reservations = _all(_RES_CONTEXT, full, 1) + _all(_RES_CODE, full)
        flights = _all(_FLIGHT, full)
        quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(full, timeout=_T)]
        return TauBenchBinding(
            domain=domain, intent=intents[0] if intents else "", intents=intents,
            order_ids=_all(_ORDER, full), user_ids=_all(_USER_ID, full),
            reservation_ids=[r for r in dict.fromkeys(reservations) if r not in flights],
            flight_numbers=flights, emails=_all(_EMAIL, full), zip_codes=_all(_ZIP, full, 1),
            phone_numbers=_all(_PHONE, full), person_names=_all(_NAME, full, 1),
            quoted_items=list(dict.fromkeys(q.strip() for q in quoted if q.strip())),
            customer_ids=_all(_CUSTOMER, full), line_ids=_all(_LINE, full),
        )
    except TimeoutError:  # pathological text: report nothing rather than a partial guess
        return TauBenchBinding(domain=domain)
