"""Structured judge calls: cache -> backend -> parse -> validate -> bounded repair.

A call either yields a validated pydantic object or ``None`` with the reason; callers turn
``None`` into UNANSWERED verdicts. Nothing here guesses a missing answer.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from rubricgym.judges.cache import ResponseCache, request_key
from rubricgym.judges.client import ChatBackend, ChatReply, ChatRequest, JudgeTransportError
from rubricgym.judges.ledger import Ledger
from rubricgym.secret_refs import redact

log = logging.getLogger(__name__)

REPAIR_MESSAGE = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with ONLY one JSON object that matches the required format. No prose, no code fences."
)
_MAX_ECHO = 2000


@dataclass
class CallResult:
    value: BaseModel | None
    error: str | None = None
    attempts: int = 0
    cache_hits: int = 0


MAX_REPLY_CHARS = 65_536  # a scoring reply is a few KB; anything this long is not an answer
MAX_JSON_DEPTH = 16  # the answer schemas nest 4 deep
MAX_START_TRIES = 8  # unclosed '{' in chatter before the answer: a bounded number of restarts


class BadReply(ValueError):
    """A reply that cannot hold an answer (too long, nested too deeply, no JSON object)."""


THINKING_MARKERS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),  # Qwen3, DeepSeek-R1, QwQ and most open reasoning models' chat templates
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
)
"""Pairs that delimit a model's thinking in its reply: the common ``<think>`` form and the other
markers open models' chat templates use."""


def strip_thinking(text: str, markers: tuple[tuple[str, str], ...] = THINKING_MARKERS) -> str:
    r"""The reply without its thinking, so that a JSON object inside the thinking is never taken
    for the answer. Per marker pair: every ``open ... close`` span goes; a close with no open
    before it (a template that opens the thinking in the prompt, as DeepSeek-R1's does) drops
    everything up to it; an open never closed (the reply was cut off while thinking) drops the
    rest. Linear: plain substring search, each character visited a bounded number of times.

    >>> strip_thinking('<think>maybe {"a": 1}?</think>\n{"a": 2}')
    '\n{"a": 2}'
    >>> strip_thinking('still thinking {"a": 1}</think>{"a": 2}')
    '{"a": 2}'
    >>> strip_thinking('{"a": 2}<think>cut off')
    '{"a": 2}'
    """
    for opening, closing in markers:
        first_close, first_open = text.find(closing), text.find(opening)
        if first_close != -1 and (first_open == -1 or first_close < first_open):
            text = text[first_close + len(closing):]
        parts, at = [], 0
        while True:
            start = text.find(opening, at)
            if start == -1:
                parts.append(text[at:])
                break
            parts.append(text[at:start])
            end = text.find(closing, start + len(opening))
            if end == -1:
                break  # cut off while thinking: nothing after the opening is an answer
            at = end + len(closing)
        text = "".join(parts)
    return text


def extract_json_object(text: str, max_chars: int = MAX_REPLY_CHARS, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The first complete JSON object in ``text`` (tolerates code fences and chatter).

    Bounded and linear: the reply's length and nesting are capped before anything is
    decoded; one left-to-right scan (string- and escape-aware) finds balanced ``{...}``
    candidates, each decoded once; an unclosed ``{`` restarts the scan at most
    ``MAX_START_TRIES`` times. Every failure is a ``BadReply`` (a ``ValueError``).
    """
    if len(text) > max_chars:
        raise BadReply(f"the reply is {len(text)} characters, over the {max_chars}-character limit")
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_START_TRIES:
        tries += 1
        end, too_deep = _balanced_end(text, start, max_depth)
        if too_deep:
            raise BadReply(f"the reply nests JSON more than {max_depth} levels deep")
        if end == -1:  # never closed: try the next '{' (an unclosed brace in chatter)
            start = text.find("{", start + 1)
            continue
        try:
            obj = json.loads(text[start:end])
        except (json.JSONDecodeError, ValueError, RecursionError):
            start = text.find("{", end)  # not JSON (prose in braces): go on after it
            tries -= 1  # a closed candidate consumed its text: the scan stays linear
            continue
        if isinstance(obj, dict):
            return obj
        start = text.find("{", end)
    raise BadReply("no JSON object found in the reply")


_SPECIAL = re.compile(r'[{}\[\]"\\]')  # one character class: linear, no backtracking


def _balanced_end(text: str, start: int, max_depth: int) -> tuple[int, bool]:
    """Index after the ``}`` that closes the ``{`` at ``start`` (-1: never closed), and
    whether the nesting went past ``max_depth`` (``[`` counts as a level too). Visits only
    the structural characters, each once."""
    depth = 0
    in_string = False
    skip = -1  # the character after a backslash inside a string
    for match in _SPECIAL.finditer(text, start):
        i = match.start()
        if i == skip:
            continue
        ch = text[i]
        if in_string:
            if ch == "\\":
                skip = i + 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            if depth > max_depth:
                return -1, True
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1, False
            if depth < 0:
                return -1, False
    return -1, False


def cache_payload(backend: ChatBackend, request: ChatRequest) -> dict[str, Any]:
    # thinking unset leaves the key as it was before the field existed (caches stay valid)
    dumped = request.model_dump(mode="json", exclude={"thinking"} if request.thinking is None else None)
    return {"v": 1, "backend": backend.identity(), "request": dumped}


class StructuredCaller:
    def __init__(self, backend: ChatBackend, ledger: Ledger, cache: ResponseCache | None = None, max_repairs: int = 2,
                 concurrency: int | None = None):
        self.backend = backend
        self.ledger = ledger
        self.cache = cache
        self.max_repairs = max_repairs
        # the limit holds across every caller of this judge (several groups or envs at once)
        self._slots = threading.BoundedSemaphore(concurrency) if concurrency else None

    def _reply(self, request: ChatRequest, step: int | None) -> tuple[ChatReply, bool]:
        key = request_key(cache_payload(self.backend, request)) if self.cache is not None else None
        if key is not None:
            stored = self.cache.get(key)
            if stored is not None:
                try:
                    reply = ChatReply.model_validate(stored)
                except ValidationError:
                    reply = None
                if reply is not None:
                    self.ledger.add(
                        request.phase,
                        step,
                        cache_hits=1,
                        cached_prompt_tokens=reply.prompt_tokens,
                        cached_completion_tokens=reply.completion_tokens,
                    )
                    return reply, True
        if self._slots is None:
            reply = self.backend.complete(request)
        else:
            with self._slots:
                reply = self.backend.complete(request)
        # a server echoing our key: redacted before the reply is parsed or cached, so a verdict's
        # text and a later cache hit are the same, and neither holds the key
        reply = reply.model_copy(update={"text": redact(reply.text)})
        self.ledger.add(
            request.phase,
            step,
            calls=1,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )
        if key is not None:
            self.cache.put(key, reply.model_dump(mode="json"))
        return reply, False

    def call(self, request: ChatRequest, model: type[BaseModel], step: int | None = None) -> CallResult:
        result = CallResult(value=None)
        current = request
        for attempt in range(self.max_repairs + 1):
            result.attempts = attempt + 1
            try:
                reply, hit = self._reply(current, step)
            except JudgeTransportError as exc:
                self.ledger.add(request.phase, step, transport_failures=1, unanswered_calls=1)
                result.error = str(exc)
                return result
            result.cache_hits += int(hit)
            answer = strip_thinking(reply.text)  # the thinking is never the answer
            try:
                if not answer.strip() and reply.text.strip():
                    raise BadReply("the reply holds only thinking, no answer after it")
                result.value = model.model_validate(extract_json_object(answer))
                result.error = None
                return result
            except (ValueError, ValidationError, RecursionError, TypeError) as exc:  # any bad reply: counted
                error = _short_error(exc, reply)
                result.error = f"invalid answer: {error}"
                self.ledger.add(request.phase, step, invalid_answers=1)
                log.debug("judge %s answer invalid (attempt %d): %s", request.phase, attempt + 1, error)
            if attempt < self.max_repairs:
                self.ledger.add(request.phase, step, repairs=1)
                current = request.model_copy(
                    update={
                        "messages": [
                            *request.messages,
                            {"role": "assistant", "content": answer[:_MAX_ECHO]},
                            {"role": "user", "content": REPAIR_MESSAGE.format(error=error)},
                        ],
                        "seed": None if request.seed is None else request.seed + attempt + 1,
                    }
                )
        self.ledger.add(request.phase, step, unanswered_calls=1)
        return result


def _short_error(exc: Exception, reply: ChatReply) -> str:
    if isinstance(exc, ValidationError):
        parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
        text = "; ".join(parts)
    else:
        text = str(exc)
    if reply.finish_reason == "length":
        text += " (the reply was cut off at the token limit; be shorter)"
    return text[:400]
