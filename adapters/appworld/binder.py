"""Task binder: instruction (+ offline metadata) -> AppWorldBinding. Deterministic, no model.

Every pattern runs with a ``regex`` time-out on at most 5,000 characters; a pattern that
times out yields nothing for its field (the binding stays valid, the field is empty)."""

from __future__ import annotations

import regex

from rubricgym.adapters.appworld.facts import AppWorldBinding

APP_NAMES = {
    "venmo": "venmo", "spotify": "spotify", "todoist": "todoist", "file system": "file_system",
    "phone": "phone", "simplenote": "simple_note", "simple note": "simple_note", "gmail": "gmail",
    "amazon": "amazon", "splitwise": "splitwise", "text message": "phone", "contacts": "phone",
}
RELATIONSHIPS = ("sister", "brother", "mother", "father", "friend", "coworker", "roommate", "partner",
                 "husband", "wife", "son", "daughter", "manager", "boss", "parent", "sibling", "cousin")
OPERATION_VERBS = {
    "create": ("create", "add", "make", "new", "save", "like", "follow", "request", "post", "write", "book"),
    "update": ("mark", "update", "change", "rename", "move", "set", "edit", "complete"),
    "delete": ("delete", "remove", "cancel", "unfollow", "unlike", "clear"),
    "send": ("send", "text", "pay", "email", "message", "reply", "forward", "transfer"),
}
_T = 0.5  # regex timeout, seconds
_QUOTED = regex.compile(r"\"([^\"\n]{1,200})\"")
_AMOUNT = regex.compile(r"\$\s?(\d{1,9}(?:\.\d{1,2})?)")
_DATE = regex.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_PATH = regex.compile(r"(?<![\w/])(~?/[\w./-]{1,200})")
_EMAIL = regex.compile(r"\b[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,4}\b")
_NAME = regex.compile(r"\b([A-Z][a-z]{1,20}) ([A-Z][a-z]{1,20})\b")
_WORD = regex.compile(r"[a-z]+")
NOT_NAMES = {"Simple", "Note", "Todoist", "Venmo", "Spotify", "Gmail", "Amazon", "Splitwise", "Answer", "Create",
             "Send", "Add", "Mark", "Delete", "Like", "Follow", "Save", "Request", "How", "What", "Each", "My", "The",
             "Midnight", "Owls", "Road", "Trip", "Chill", "Vibes", "Home", "Work", "Inbox", "Happy", "See", "Sunday"}


MAX_INSTRUCTION_CHARS = 5000


def _find(pattern: regex.Pattern[str], text: str) -> list:
    try:
        return pattern.findall(text, timeout=_T)
    except TimeoutError:
        return []


def _strip(pattern: regex.Pattern[str], text: str) -> str:
    try:
        return pattern.sub(" ", text, timeout=_T)
    except TimeoutError:
        return text


def bind_task(instruction: str, apps: list[str] | None = None,
              operations: list[str] | None = None) -> AppWorldBinding:
    """The binding of one task; the same instruction and metadata always give the same binding."""
    text = instruction[:MAX_INSTRUCTION_CHARS]
    lower = text.lower()
    words = set(_find(_WORD, lower))
    found_apps = set(apps or [])
    for phrase, app in APP_NAMES.items():
        if phrase in lower:
            found_apps.add(app)
    quoted = _find(_QUOTED, text)
    unquoted = _strip(_QUOTED, text)
    people = [f"{a} {b}" for a, b in _find(_NAME, unquoted) if a not in NOT_NAMES and b not in NOT_NAMES]
    ops = set(operations or [])
    if not operations:
        for op, verbs in OPERATION_VERBS.items():
            if words & set(verbs):
                ops.add(op)
        ops.add("read")
    expects_answer = text.rstrip().endswith("?") or "answer" in words or lower.startswith(("how ", "what ", "which "))
    if expects_answer:
        ops.add("answer")
    return AppWorldBinding(
        apps=sorted(found_apps),
        people=list(dict.fromkeys(people)),
        emails=list(dict.fromkeys(_find(_EMAIL, text))),
        quoted=quoted,
        amounts=[float(a) for a in _find(_AMOUNT, text)],
        dates=_find(_DATE, text),
        file_paths=_find(_PATH, unquoted),
        relationships=[r for r in RELATIONSHIPS if r in words],
        required_operations=sorted(ops),
        expects_answer=expects_answer,
        needs_all_items=bool(words & {"all", "every", "each", "many", "total"}),
    )
