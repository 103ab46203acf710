"""tau-bench's facts, built from the agent's action text and tau2's replies.

Pure functions classify actions, check arguments against tool schemas and find entity ids;
``ObservedConversation`` keeps the episode's memory (ids seen, accepted writes, database
fingerprints, the last action) and builds each step's facts dict from it.

Nothing here imports tau2: everything works on recorded strings and plain data (``Replies``),
so the classification of malformed calls and the entity ids can be tested without the engine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import regex
from pydantic import BaseModel, Field

from rubricgym.adapters.tau_bench.binder import bind_task

STOP_TOKEN = "###STOP###"
STOP_TOOL = "done"
TRANSFER_TOOL = "transfer_to_human_agents"
MAX_RESULT_CHARS = 4000  # tool results shown in facts (observations keep the full text)
MAX_JSON_DEPTH = 32  # nested JSON deeper than this is refused, not walked
MAX_ENTITIES_PER_STEP = 200
MAX_MESSAGE_CHARS = 2000  # agent messages and user replies shown in facts
MUTABLE_TOOL_TYPES = frozenset({"write", "generic"})  # tau2 tool types after which the databases are fingerprinted

CallKind = Literal["tool", "message", "stop", "invalid"]


class AgentCall(BaseModel):
    """One agent action as read from the ``<action>`` content: a tool call, a message or stop."""

    kind: CallKind
    name: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    message: str = ""
    num_calls: int = 0
    error: str = Field("", description="why the action is invalid: malformed_json, multiple_calls, bad_call_shape, too_deep")
    detail: str = ""


def _invalid(error: str, detail: str, num_calls: int = 0) -> AgentCall:
    return AgentCall(kind="invalid", error=error, detail=detail, num_calls=num_calls)


def _depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of decoded JSON, iteratively (never recursion-limited), capped at ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, d = stack.pop()
        if d > limit:
            return d
        deepest = max(deepest, d)
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
    return deepest


def _one_call(obj: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(name, arguments) of one call in our JSON or the OpenAI tool-call shape, else None."""
    fn = obj.get("function")
    if isinstance(fn, Mapping):
        obj = fn
    name, args = obj.get("name"), obj.get("arguments", {})
    if not isinstance(name, str):
        return None
    if isinstance(args, str):  # OpenAI sends arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except RecursionError:
            return name, _DEEP_ARGS
        except ValueError:
            return name, _BAD_ARGS
        if _depth(args) > MAX_JSON_DEPTH:  # the outer check saw only a string
            return name, _DEEP_ARGS
    return name, args


_BAD_ARGS = object()
_DEEP_ARGS = object()


def parse_agent_action(text: str) -> AgentCall:
    """Classify the content of one ``<action>``; never raises.

    - a JSON object ``{"name": ..., "arguments": {...}}`` or an OpenAI tool call
      (``{"type": "function", "function": {"name", "arguments": "<json>"}}`` or an assistant
      message ``{"tool_calls": [...]}``) is one tool call; ``done`` ends the conversation;
    - a JSON list of calls, or ``tool_calls`` with several entries, is ``multiple_calls``
      (nothing is executed);
    - any other text is a message to the user (``###STOP###`` in it ends the conversation).
    """
    stripped = text.strip()
    if not stripped:
        return _invalid("empty", "the action is empty")
    if stripped[0] not in "[{":
        kind: CallKind = "stop" if STOP_TOKEN in stripped else "message"
        return AgentCall(kind=kind, message=stripped)
    try:
        obj = json.loads(stripped)
    except RecursionError:
        return _invalid("too_deep", f"JSON nested deeper than {MAX_JSON_DEPTH}")
    except ValueError as exc:
        return _invalid("malformed_json", f"not valid JSON: {str(exc)[:200]}")
    if _depth(obj) > MAX_JSON_DEPTH:
        return _invalid("too_deep", f"JSON nested deeper than {MAX_JSON_DEPTH}")
    if isinstance(obj, dict) and "tool_calls" in obj:
        calls = obj.get("tool_calls")
        if calls is None or calls == []:
            content = obj.get("content")
            if isinstance(content, str) and content.strip():
                return parse_agent_action(content) if content.strip()[0] not in "[{" else _invalid(
                    "bad_call_shape", "message content must be text")
            return _invalid("bad_call_shape", "tool_calls is empty and there is no content")
        if not isinstance(calls, list):
            return _invalid("bad_call_shape", "tool_calls must be a list")
        obj = calls if len(calls) != 1 else calls[0]
    if isinstance(obj, list):
        if len(obj) == 1 and isinstance(obj[0], dict):
            obj = obj[0]
        else:
            return _invalid("multiple_calls", f"{len(obj)} tool calls in one action; exactly one is executed per step",
                            num_calls=len(obj))
    if not isinstance(obj, dict):
        return _invalid("bad_call_shape", f"a tool call is a JSON object, got {type(obj).__name__}")
    if "name" not in obj and "function" not in obj and isinstance(obj.get("content"), str):
        return parse_agent_action(obj["content"]) if obj["content"].strip()[:1] not in ("[", "{") else _invalid(
            "bad_call_shape", "message content must be text")
    call = _one_call(obj)
    if call is None:
        return _invalid("bad_call_shape", 'a tool call needs a string "name" and an "arguments" object')
    name, args = call
    if args is _BAD_ARGS:
        return _invalid("malformed_json", f"arguments of {name!r} are not valid JSON", num_calls=1)
    if args is _DEEP_ARGS:
        return _invalid("too_deep", f"arguments of {name!r}: JSON nested deeper than {MAX_JSON_DEPTH}", num_calls=1)
    if not isinstance(args, dict):
        return _invalid("bad_call_shape", f"arguments of {name!r} must be a JSON object, got {type(args).__name__}",
                        num_calls=1)
    if not name.strip():
        return _invalid("bad_call_shape", "the tool name is empty", num_calls=1)
    if name == STOP_TOOL:
        return AgentCall(kind="stop", name=name, arguments=args, num_calls=1)
    return AgentCall(kind="tool", name=name, arguments=args, num_calls=1)


# -- entity ids --------------------------------------------------------------------------
ID_KEYS = frozenset({
    "user_id", "order_id", "reservation_id", "item_id", "product_id", "payment_method_id", "customer_id",
    "line_id", "phone_number", "flight_number", "bill_id", "plan_id", "device_id", "task_id", "new_item_id",
})
ID_LIST_KEYS = frozenset({"orders", "reservations", "line_ids", "bill_ids", "order_ids", "item_ids"})


def result_entities(content: str) -> list[str]:
    """Entity ids in a tool result: values under id keys of the JSON tau2 returns."""
    if not content or content[:1] not in "[{":
        return []
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return []
    if _depth(data) > MAX_JSON_DEPTH:
        return []
    found: list[str] = []
    stack: list[Any] = [data]
    while stack and len(found) < MAX_ENTITIES_PER_STEP:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ID_KEYS and isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
                    found.append(str(value))
                elif key in ID_LIST_KEYS and isinstance(value, list):
                    found.extend(str(v) for v in value if isinstance(v, (str, int)) and not isinstance(v, bool))
                elif isinstance(value, (dict, list)):
                    stack.append(value)
                if isinstance(key, str) and key in ("orders", "reservations") and isinstance(value, dict):
                    found.extend(str(k) for k in value)
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return list(dict.fromkeys(found))[:MAX_ENTITIES_PER_STEP]


def text_entities(text: str) -> list[str]:
    """Entity ids a user states in words (orders, user ids, reservations, phones, customers, lines)."""
    b = bind_task(text)
    return list(dict.fromkeys(b.order_ids + b.user_ids + b.reservation_ids + b.phone_numbers
                              + b.customer_ids + b.line_ids + b.emails))


_QUESTION = regex.compile(
    r"\?|\b(?:please\s+(?:provide|confirm|share|tell|give|let\s+me\s+know)|could\s+you|can\s+you|would\s+you"
    r"|may\s+i\s+have|what\s+is\s+your|do\s+you\s+(?:want|confirm))\b",
    regex.IGNORECASE,
)


def asks_user(text: str) -> bool:
    """The agent's message asks the user for something (a question or an explicit request)."""
    try:
        return _QUESTION.search(text[:4000], timeout=0.5) is not None
    except TimeoutError:
        return False


def argument_values(arguments: Mapping[str, Any], limit: int = 64) -> list[str]:
    """Scalar argument values as strings (nested ones too), for matching against the binding."""
    out: list[str] = []
    stack: list[Any] = [arguments]
    while stack and len(out) < limit:
        node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, (str, int, float)) and not isinstance(node, bool):
            out.append(str(node)[:200])
    return out


def schema_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """Mismatches between call arguments and a tool's JSON schema (required, unknown, JSON types)."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    problems = [f"missing: {k}" for k in schema.get("required") or () if k not in arguments]
    for key, value in arguments.items():
        spec = props.get(key)
        if spec is None:
            problems.append(f"unknown: {key}")
        elif not _type_ok(spec, value):
            problems.append(f"type: {key}")
    return problems


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),),
}


def _type_ok(spec: Mapping[str, Any], value: Any) -> bool:
    options: Iterable[Mapping[str, Any]] = spec.get("anyOf") or spec.get("oneOf") or [spec]
    for option in options:
        t = option.get("type")
        if t is None:  # $ref to a model, enum without a type, ...: a JSON object or anything
            if "$ref" in option:
                if isinstance(value, dict):
                    return True
                continue
            return True
        types = t if isinstance(t, list) else [t]
        for name in types:
            py = _JSON_TYPES.get(name)
            if py is None:
                return True
            if isinstance(value, bool) and name in ("integer", "number"):
                continue
            if isinstance(value, py):
                if name == "array" and "items" in option and isinstance(option["items"], Mapping):
                    if all(_type_ok(option["items"], v) for v in value[:50]):
                        return True
                    continue
                return True
    return False


def truncate(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"


def _jsonable(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as plain JSON data, or ``{}`` when it does not round-trip."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return {}


# -- the episode's facts -------------------------------------------------------------------
@dataclass
class ToolResult:
    content: str
    error: bool


@dataclass
class Replies:
    """What followed one agent action, as plain data (``engine.replies`` reads it off tau2's messages)."""

    agent_results: list[ToolResult] = field(default_factory=list)  # results of the agent's own tool calls
    user_texts: list[str] = field(default_factory=list)  # the user's non-empty messages
    user_tool_calls: list[str] = field(default_factory=list)  # device tools the user ran (telecom)
    user_tool_errors: int = 0  # how many of those failed


class ObservedConversation:
    """One episode's memory of what the agent observed, and the facts of each step built from it.

    tau2's state enters only as the agent's tool schemas and types, the user's tool names,
    database fingerprints (asked for only after steps that may write) and the error count.
    ``hash_reads`` also fingerprints after read-only tools (the tests check tau2's declaration).
    """

    def __init__(self, domain: str, hash_reads: bool = False):
        self.domain = domain
        self.hash_reads = hash_reads
        self.parameters: dict[str, Mapping[str, Any]] = {}
        self.tool_types: dict[str, str] = {}
        self.user_tools: frozenset[str] = frozenset()
        self.fingerprint = ("", "")
        self.writes = 0
        self.last = "start"
        self._entities: dict[str, None] = {}  # ids in first-seen order
        self._call = AgentCall(kind="invalid")  # the call being executed (see ``act``) and its facts
        self._facts: dict[str, Any] = {}

    def start(self, parameters: Mapping[str, Mapping[str, Any]], tool_types: Mapping[str, str],
              user_tools: Iterable[str], fingerprint: tuple[str, str], user_texts: Sequence[str]) -> dict[str, Any]:
        """Begin after tau2's opening: ``parameters`` maps each agent tool to its arguments' JSON schema,
        ``user_texts`` are the user's opening words. Returns the reset's facts."""
        self.parameters, self.tool_types = dict(parameters), dict(tool_types)
        self.user_tools, self.fingerprint = frozenset(user_tools), fingerprint
        self._see([e for text in user_texts for e in text_entities(text)])
        return {"domain": self.domain}

    def standing_facts(self, errors: int) -> dict[str, Any]:
        """Facts every step carries; ``errors`` is tau2's tool-error count so far."""
        return {"domain": self.domain, "write_calls": self.writes, "errors_so_far": errors}

    def invalid_facts(self, call: AgentCall, errors: int) -> dict[str, Any]:
        """Facts of an action that was read as invalid and not executed."""
        facts = self.standing_facts(errors)
        facts.update(call_kind="invalid", call_error=call.error, num_calls=call.num_calls)
        return facts

    def act(self, call: AgentCall, errors: int) -> None:
        """Note the agent's call before tau2 runs it (the facts describe the call as sent)."""
        self._call, self._facts = call, self._call_facts(call, errors)

    def answered(self, replies: Replies, *, errors: int, user_stopped: bool, termination: str,
                 fingerprint: Callable[[], tuple[str, str]]) -> dict[str, Any]:
        """The step's facts: the call's (see ``act``) and what followed it. ``termination`` is tau2's
        reason ('' while the conversation goes on); ``fingerprint`` reads the databases now."""
        call, facts, self._facts = self._call, self._facts, {}
        facts.update(self._reply_facts(call, replies, errors, user_stopped, fingerprint))
        if termination:
            facts["termination"] = termination
        self.last = call.name if call.kind == "tool" else call.kind
        return facts

    def tool_type(self, name: str) -> str:
        """tau2's declared type of an agent tool ('' for unknown tools)."""
        return self.tool_types.get(name, "")

    def entities(self) -> list[str]:
        return list(self._entities)

    def signature(self) -> str:
        digest = hashlib.sha256("|".join(self.fingerprint).encode())
        digest.update("\x1f".join(self._entities).encode())
        return digest.hexdigest()[:24]

    def context_key(self) -> str:
        return f"{self.domain}|after:{self.last}|writes:{min(self.writes, 3)}"

    def _see(self, ids: Iterable[str]) -> None:
        for e in ids:
            self._entities.setdefault(e, None)

    def _call_facts(self, call: AgentCall, errors: int) -> dict[str, Any]:
        facts = self.standing_facts(errors)
        facts.update(call_kind=call.kind, num_calls=call.num_calls, tool_name=call.name)
        if call.kind == "tool":
            schema = self.parameters.get(call.name)
            known = schema is not None
            problems = schema_problems(schema, call.arguments) if schema is not None else []
            facts.update(
                tool_arguments=_jsonable(call.arguments), argument_values=argument_values(call.arguments),
                tool_known=known, user_side_tool=not known and call.name in self.user_tools,
                tool_type=self.tool_type(call.name), arguments_valid=known and not problems,
                argument_problems=problems if known else [f"unknown tool: {call.name}"],
            )
        elif call.kind in ("message", "stop"):
            facts.update(message_text=truncate(call.message, MAX_MESSAGE_CHARS), asked_user=asks_user(call.message),
                         agent_stopped=call.kind == "stop")
        return facts

    def _reply_facts(self, call: AgentCall, replies: Replies, errors: int, user_stopped: bool,
                     fingerprint: Callable[[], tuple[str, str]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        revealed: list[str] = []
        if replies.agent_results:
            result = replies.agent_results[0]
            revealed = (result_entities(result.content) or text_entities(result.content)) if not result.error else []
            out.update(tool_error=result.error, result_text=truncate(result.content), result_entities=revealed)
            if not result.error and call.name == TRANSFER_TOOL:
                out["transferred"] = True
            if not result.error and self.tool_type(call.name) == "write":
                self.writes += 1
        stated = [e for text in replies.user_texts for e in text_entities(text)]
        self._see(revealed + stated)
        tool_type = self.tool_type(call.name) if call.kind == "tool" else ""
        if replies.user_tool_calls or tool_type in MUTABLE_TOOL_TYPES or (call.kind == "tool" and self.hash_reads):
            before, self.fingerprint = self.fingerprint, fingerprint()
            out.update(db_changed=before[0] != self.fingerprint[0], user_db_changed=before[1] != self.fingerprint[1])
        out.update(user_reply=truncate("\n".join(replies.user_texts), MAX_MESSAGE_CHARS),
                   user_entities=list(dict.fromkeys(stated)), user_tool_calls=replies.user_tool_calls,
                   user_tool_errors=replies.user_tool_errors, user_stopped=user_stopped,
                   write_calls=self.writes, errors_so_far=errors)
        return out
