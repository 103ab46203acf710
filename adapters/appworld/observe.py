"""All of AppWorld's fact building: pure functions of what the engine returned (its output
text, the requests its request tracker recorded, the code as written) and of the episode
memory carried between steps (``observe_step``), and ``ObservedEpisode``, the one tracker
the adapter feeds each step; it also gives the state signature and context key."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from rubricgym.adapters.appworld.code_analysis import analyze_code
from rubricgym.adapters.appworld.facts import CodeCallSite, ExecutedCall
from rubricgym.adapters.appworld.output_analysis import analyze_output

NON_APPS = frozenset({"supervisor", "api_docs"})
AUTH_APIS = frozenset({"login", "logout"})
SECRET_KEYS = frozenset({"password", "token", "access_token", "refresh_token", "secret", "verification_code",
                         "password_reset_code", "reset_code", "otp", "card_number", "cvv", "cvc", "pin"})
SECRET_SUFFIXES = ("password", "_token", "_secret")
REDACTED = "<redacted>"
MAX_ARG_CHARS = 120
MAX_CALLS_KEPT = 200  # facts keep the first 200 calls; counts cover all of them


def is_secret_key(name: str) -> bool:
    lowered = name.lower()
    return lowered in SECRET_KEYS or lowered.endswith(SECRET_SUFFIXES)


def _argument_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= MAX_ARG_CHARS else text[: MAX_ARG_CHARS - 3] + "..."


def redact_arguments(data: Mapping[str, Any]) -> dict[str, str]:
    """Argument reprs with every secret-looking argument (password, access_token, ...) hidden."""
    return {str(k): REDACTED if is_secret_key(str(k)) else _argument_text(v) for k, v in data.items()}


def call_kind(app: str, api: str, method: str) -> str:
    if api in AUTH_APIS:
        return "auth"
    if app == "supervisor" and api == "complete_task":
        return "answer"
    return "read" if method == "GET" else "write"


def _page_index(data: Mapping[str, Any]) -> int | None:
    raw = data.get("page_index")
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit() and len(raw.strip()) <= 9:
        return int(raw.strip())  # ASCII digits only: str.isdigit also accepts '²', which int() refuses
    return None


def executed_call(entry: Mapping[str, Any]) -> ExecutedCall:
    """One request-tracker entry (annotated by the server with app, api, status, size)."""
    method = str(entry.get("method", "")).upper()
    data = entry.get("data") if isinstance(entry.get("data"), Mapping) else {}
    app, api = entry.get("app"), entry.get("api")
    if not app:  # a raw requester.get(url): the app is the first path segment
        parts = [p for p in urlparse(str(entry.get("url", ""))).path.split("/") if p]
        app, api = (parts[0] if parts else "?"), "/" + "/".join(parts[1:])
    status = entry.get("status")
    status = int(status) if isinstance(status, int) else None
    return ExecutedCall(
        app=str(app), api=str(api), method=method, kind=call_kind(str(app), str(api), method),  # type: ignore[arg-type]
        arguments=redact_arguments(data), status=status, success=status is not None and 200 <= status < 300,
        response_bytes=int(entry.get("response_bytes") or 0), page_index=_page_index(data))


@dataclass(frozen=True)
class EpisodeMemory:
    """What the facts of a step depend on from earlier steps."""

    authenticated: frozenset[str] = frozenset()
    page_seen: Mapping[str, int] = field(default_factory=dict)  # 'app.api' -> highest page index read


@dataclass
class StepObservation:
    facts: dict[str, Any]
    entities: list[str]
    memory: EpisodeMemory
    complete_task_served: bool
    error_text: str = ""  # the output's last lines when the execution failed


def executed_facts(calls: list[ExecutedCall], memory: EpisodeMemory) -> tuple[dict[str, Any], EpisodeMemory]:
    """Facts from the requests served, and the episode memory after them."""
    ok = [c for c in calls if c.success]
    app_calls = [c for c in calls if c.app not in NON_APPS]
    writes = [c for c in app_calls if c.kind == "write"]
    logins = sorted({c.app for c in ok if c.api == "login" and c.app not in NON_APPS})
    page_seen = dict(memory.page_seen)
    paginated, advanced = [], False
    for c in ok:
        if c.kind != "read" or c.page_index is None:
            continue
        key = f"{c.app}.{c.api}"
        paginated.append(key)
        if c.page_index > page_seen.get(key, 0):
            advanced = True
        page_seen[key] = max(page_seen.get(key, 0), c.page_index)
    answers = [c for c in ok if c.kind == "answer"]
    error_codes = sorted({c.status for c in calls if c.status is not None and c.status >= 400})
    authenticated = memory.authenticated | set(logins)
    facts = dict(
        executed_calls=calls[:MAX_CALLS_KEPT],
        num_executed_calls=len(calls),
        call_counts=dict(Counter(f"{c.app}.{c.api}" for c in calls)),
        apps_called=sorted({c.app for c in app_calls}),
        read_api_called=any(c.kind == "read" and c.success for c in app_calls),
        reads=sorted({f"{c.app}.{c.api}" for c in app_calls if c.kind == "read" and c.success}),
        write_attempted=bool(writes),
        mutating_apis=sorted({f"{c.app}.{c.api}" for c in writes if c.success}),
        failed_writes=sorted({f"{c.app}.{c.api}" for c in writes if not c.success}),
        state_mutated=any(c.success for c in writes),
        api_docs_consulted=any(c.app == "api_docs" for c in ok),
        login_apps=logins,
        authenticated_apps=sorted(authenticated),
        passwords_fetched=any(c.app == "supervisor" and c.api == "show_account_passwords" for c in ok),
        uses_access_token=any("access_token" in c.arguments for c in calls),
        paginated_apis=sorted(set(paginated)),
        pagination_advanced=advanced,
        complete_task_called=bool(answers),
        answer_given=any(c.arguments.get("answer", "null") not in ("null", "''", '""') for c in answers),
        api_error=bool(error_codes),
        api_error_codes=error_codes,
    )
    return facts, EpisodeMemory(authenticated=frozenset(authenticated), page_seen=page_seen)


def code_facts(code: str) -> dict[str, Any]:
    """What only the code can tell (static, named ``code_*``)."""
    analysis = analyze_code(code)
    return dict(
        syntax_error=not analysis.syntax_ok,
        code_call_sites=[CodeCallSite(app=c.app, api=c.api, arguments=c.arguments, in_loop=c.in_loop)
                         for c in analysis.calls],
        code_has_loop=analysis.has_loop,
        code_imports=analysis.imports,
        code_lines=analysis.lines,
    )


def observe_step(code: str, output: str, requests: Iterable[Mapping[str, Any]], memory: EpisodeMemory,
                 resource_limit: str | None = None) -> StepObservation:
    """All benchmark facts of one step but ``task_completed`` (AppWorld is asked for it only
    when ``complete_task_served``: ``ObservedEpisode.observe`` does)."""
    calls = [executed_call(r) for r in requests]
    facts, memory = executed_facts(calls, memory)
    out = analyze_output(output)
    static = code_facts(code)
    facts.update(static)
    facts.update(
        syntax_error=static["syntax_error"] or out.exception_type == "SyntaxError",
        execution_failed=out.execution_failed,
        exception_type=out.exception_type,
        timed_out=out.timed_out,
        resource_limit=resource_limit,
        api_error=facts["api_error"] or out.api_error,
        api_error_codes=sorted(set(facts["api_error_codes"]) | set(out.api_error_codes)),
        api_error_messages=out.api_error_messages,
        printed_output=out.printed,
        output_chars=len(output),
        emails_seen=out.emails[:50],
        secret_in_output=bool(out.secret_kinds),
        secret_kinds=out.secret_kinds,
        task_completed=False,
    )
    error_text = "\n".join(output.strip().splitlines()[-3:]) if out.execution_failed else ""
    return StepObservation(facts=facts, entities=out.entity_ids + out.emails, memory=memory,
                           complete_task_served=facts["complete_task_called"], error_text=error_text)


@dataclass
class ObservedEpisode:
    """What one episode's facts, state signature and context key depend on, updated from
    each step's engine output."""

    memory: EpisodeMemory = field(default_factory=EpisodeMemory)
    touched: set[str] = field(default_factory=set)  # apps called
    mutations: int = 0  # steps with a successful write
    explored: bool = False
    completed: bool = False

    def observe(self, code: str, output: str, requests: Iterable[Mapping[str, Any]], resource_limit: str | None,
                task_completed: Callable[[], Any]) -> StepObservation:
        """The step's observation, with ``task_completed`` from AppWorld (``task_completed()``
        is called only when a ``complete_task`` request was served)."""
        seen = observe_step(code, output, requests, self.memory, resource_limit=resource_limit)
        facts = seen.facts
        self.memory = seen.memory
        self.explored = self.explored or facts["num_executed_calls"] > 0
        self.touched |= set(facts["apps_called"])
        self.mutations += int(facts["state_mutated"])
        if seen.complete_task_served:
            self.completed = bool(task_completed())
        facts["task_completed"] = self.completed
        return seen

    def stage(self) -> str:
        if self.completed:
            return "completed"
        if self.mutations:
            return "mutated"
        if self.memory.authenticated:
            return "authenticated"
        return "explored" if self.explored else "start"

    def context_key(self) -> str:
        auth = ",".join(sorted(self.memory.authenticated)) or "-"
        return f"apps={','.join(sorted(self.touched)) or '-'}|auth={auth}|stage={self.stage()}"

    def signature(self) -> str:
        raw = json.dumps([sorted(self.memory.authenticated), self.mutations, self.completed])
        return hashlib.sha1(raw.encode()).hexdigest()[:16]
