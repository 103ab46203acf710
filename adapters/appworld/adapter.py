"""``AppWorldAdapter``: AppWorld tasks behind ``RubricEnv``, executed by AppWorld's own
environment server (its own venv, its own process); agent code never runs in ours."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricgym.adapter import Adapter, EngineFailure, EngineReset, EngineStep
from rubricgym.adapters.appworld.binder import bind
from rubricgym.adapters.appworld.client import EnvironmentClient, ServerCallError
from rubricgym.adapters.appworld.code_analysis import analyze_code, is_mutating
from rubricgym.adapters.appworld.facts import ApiCall, AppWorldBinding, AppWorldFacts
from rubricgym.adapters.appworld.grammar import CODE_GRAMMAR, code_of
from rubricgym.adapters.appworld.output_analysis import analyze_output
from rubricgym.adapters.appworld.paths import OFFICIAL_SPLITS, official_data_root, offline_data_root
from rubricgym.adapters.appworld.server import AppWorldServer
from rubricgym.contract import Outcome, ParsedAction

log = logging.getLogger(__name__)
SPLITS = ("default", *OFFICIAL_SPLITS)
NON_APPS = {"supervisor", "api_docs"}
PROMPT = """Task: {instruction}
I am {first_name} {last_name} (email {email}, phone {phone_number}); it is now {datetime}.
Solve the task by writing Python code, one block per step; I run it and show you its output.
Call apps as apis.<app>.<api>(...). Find apps and APIs with apis.api_docs.show_app_descriptions(),
apis.api_docs.show_api_descriptions(app_name=...) and apis.api_docs.show_api_doc(app_name=..., api_name=...).
My account passwords: apis.supervisor.show_account_passwords(). When done call
apis.supervisor.complete_task() (with answer=... if the task asks a question).
Reply with <action>code</action> or a ```python code block."""


@dataclass
class _Episode:
    task_id: str
    instruction: str
    binding: AppWorldBinding
    authenticated: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)
    page_seen: dict[str, int] = field(default_factory=dict)
    mutations: int = 0
    explored: bool = False
    completed: bool = False
    evaluation: dict[str, Any] | None = None
    failure: str | None = None

    def stage(self) -> str:
        if self.completed:
            return "completed"
        if self.mutations:
            return "mutated"
        if self.authenticated:
            return "authenticated"
        return "explored" if self.explored else "start"

    def context_key(self) -> str:
        return (f"apps={','.join(sorted(self.touched)) or '-'}|auth={','.join(sorted(self.authenticated)) or '-'}"
                f"|stage={self.stage()}")

    def signature(self) -> str:
        raw = json.dumps([sorted(self.authenticated), self.mutations, self.completed])
        return hashlib.sha1(raw.encode()).hexdigest()[:16]


class AppWorldAdapter(Adapter):
    """One AppWorld environment server per adapter, reused across episodes (one world at a time).

    ``step_timeout_s`` is AppWorld's own execution limit; the HTTP call gets
    ``step_timeout_s + call_margin_s`` and a server that misses it is killed as hung. World
    initialization and evaluation get ``setup_timeout_s`` (a cold server loads its apps then).
    """

    benchmark = "AppWorld"
    facts_model = AppWorldFacts
    binding_model = AppWorldBinding
    grammar = CODE_GRAMMAR

    def __init__(
        self,
        split: str = "default",
        data_root: str | os.PathLike[str] | None = None,
        step_timeout_s: int = 20,
        call_margin_s: float = 10.0,
        server_start_timeout_s: float = 120.0,
        setup_timeout_s: float = 120.0,
        stop_grace_s: float = 10.0,
        max_observation_chars: int = 20_000,
    ):
        if split not in SPLITS:
            raise ValueError(f"AppWorld split must be one of {SPLITS}, got {split!r}")
        if int(step_timeout_s) < 1:
            raise ValueError("step_timeout_s must be >= 1 (AppWorld's limit is whole seconds)")
        self.split = split
        if data_root is not None:
            self.data_root = Path(data_root).resolve()
        else:
            self.data_root = offline_data_root() if split == "default" else official_data_root(split)
        self.step_timeout_s = int(step_timeout_s)
        self.call_timeout_s = self.step_timeout_s + float(call_margin_s)
        self.setup_timeout_s = float(setup_timeout_s)  # world init / evaluation: our code, not the agent's
        self.max_observation_chars = max_observation_chars
        self._task_meta, self._api_index, self._task_ids = self._load_tasks()
        self.server = AppWorldServer(self.data_root, start_timeout_s=server_start_timeout_s,
                                     stop_grace_s=stop_grace_s)
        self.experiment_name = f"rubricgym_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self._client: EnvironmentClient | None = None
        self._episode: _Episode | None = None
        self._world_open = False

    # -- tasks -----------------------------------------------------------------------------
    def _load_tasks(self) -> tuple[dict[str, dict], dict[str, dict], list[str]]:
        index_path = self.data_root / "rubricgym_index.json"
        index = json.loads(index_path.read_text()) if index_path.exists() else {}
        meta = {t["id"]: t for t in index.get("tasks", [])}
        if self.split == "default":
            ids = list(meta)
        else:
            listing = self.data_root / "data" / "datasets" / f"{self.split}.txt"
            ids = [line.strip() for line in listing.read_text().splitlines() if line.strip()]
        if not ids:
            raise RuntimeError(f"no AppWorld tasks found under {self.data_root}")
        return meta, index.get("apis", {}), ids

    def task_ids(self) -> Sequence[str]:
        return self._task_ids

    # -- server ----------------------------------------------------------------------------
    def _ensure_server(self) -> EnvironmentClient:
        if self._client is None or not self.server.alive() or not self.server.healthy():
            if self.server.process is not None:
                log.warning("AppWorld server %s is not healthy; restarting it", self.server.url)
            self.server.restart()
            if self._client is not None:
                self._client.close()
            self._client = EnvironmentClient(self.server.url, self.call_timeout_s)
            self._world_open = False
        return self._client

    def _broken(self, exc: ServerCallError) -> EngineFailure:
        """Kill the server (a hung one cannot answer; a dead one is reaped); reset restarts it."""
        died = not self.server.alive()
        code = self.server.process.returncode if self.server.process is not None else None
        self.server.kill()
        self._world_open = False
        what = f"server process exited (code {code})" if died else ("server hung" if exc.hung else "server error")
        message = f"AppWorld {what}: {exc}"
        if self._episode is not None:
            self._episode.failure = message
        return EngineFailure(message)

    def _call(self, method: str, timeout_s: float | None = None, **payload: Any) -> Any:
        assert self._client is not None and self._episode is not None
        try:
            return self._client.call(method, timeout_s=timeout_s or self.setup_timeout_s,
                                     task_id=self._episode.task_id, **payload)
        except ServerCallError as exc:
            raise self._broken(exc) from exc

    # -- episode ---------------------------------------------------------------------------
    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        if task_id not in self._task_ids:
            raise ValueError(f"unknown AppWorld task {task_id!r}")
        self._close_world()
        last_error: ServerCallError | None = None
        for _ in range(2):  # a server that broke since the last episode is restarted once
            client = self._ensure_server()
            try:
                task = client.call("initialize", timeout_s=self.setup_timeout_s, task_id=task_id,
                                   experiment_name=self.experiment_name,
                                   timeout_seconds=self.step_timeout_s, load_ground_truth=True)
                break
            except ServerCallError as exc:
                last_error = exc
                self.server.kill()
        else:
            raise EngineFailure(f"AppWorld could not initialize task {task_id!r}: {last_error}")
        self._world_open = True
        meta = self._task_meta.get(task_id, {})
        instruction = task["instruction"]
        self._episode = _Episode(task_id=task_id, instruction=instruction,
                                 binding=bind(instruction, meta.get("apps"), meta.get("operations")))
        observation = PROMPT.format(instruction=instruction, datetime=task.get("datetime", ""), **task["supervisor"])
        return EngineReset(
            observation=observation,
            instruction=instruction,
            state_signature=self._episode.signature(),
            context_key=self._episode.context_key(),
            info={"supervisor": task["supervisor"], "datetime": task.get("datetime")},
        )

    def step(self, action: ParsedAction) -> EngineStep:
        episode = self._episode
        if episode is None or not self._world_open:
            raise EngineFailure("AppWorld world is not open (the server failed earlier in this episode)")
        code = code_of(action.action or "")
        code_facts = analyze_code(code)
        output = self._call("execute", timeout_s=self.call_timeout_s, code=code)
        if not isinstance(output, str):
            output = str(output)
        out = analyze_output(output)

        calls = [ApiCall(app=c.app, api=c.api, arguments=c.arguments, in_loop=c.in_loop,
                         mutating=is_mutating(c.app, c.api, self._api_index)) for c in code_facts.calls]
        app_calls = [c for c in calls if c.app not in NON_APPS]
        mutating = sorted({f"{c.app}.{c.api}" for c in calls if c.mutating and c.api != "complete_task"})
        state_mutated = bool(mutating) and not out.execution_failed
        logins = sorted({c.app for c in calls if c.api == "login"}) if not out.execution_failed else []
        paginated, advanced = [], False
        for c in calls:
            if "page_index" not in c.arguments:
                continue
            key = f"{c.app}.{c.api}"
            paginated.append(key)
            raw = c.arguments["page_index"]
            if raw.isdigit():
                if int(raw) > episode.page_seen.get(key, 0):
                    advanced = True
                episode.page_seen[key] = max(episode.page_seen.get(key, 0), int(raw))
            else:  # computed page index (a loop variable): the code walks pages
                advanced = True
        complete_called = any(c.app == "supervisor" and c.api == "complete_task" for c in calls)
        answer_given = any(c.app == "supervisor" and c.api == "complete_task" and c.arguments.get(
            "answer", c.arguments.get("arg0", "None")) != "None" for c in calls)

        episode.explored = episode.explored or bool(calls)
        episode.touched |= {c.app for c in app_calls}
        episode.authenticated |= set(logins)
        episode.mutations += int(state_mutated)
        if "complete_task" in code:  # any spelling that could reach it; cheap when absent
            episode.completed = bool(self._call("task_completed"))
        reward = 0.0
        if episode.completed:
            episode.evaluation = self._evaluate()
            reward = 1.0 if episode.evaluation.get("success") else 0.0

        observation = output
        if len(observation) > self.max_observation_chars:
            observation = (observation[: self.max_observation_chars]
                           + f"\n... [output truncated: {len(output)} characters in all]")
        facts = dict(  # benchmark fields only; RubricEnv adds the shared ones and validates
            api_calls=calls,
            apps_called=sorted({c.app for c in app_calls}),
            num_api_calls=len(calls),
            read_api_called=any(not c.mutating and c.api not in ("login", "logout") for c in app_calls),
            mutating_apis=mutating,
            mutating_api_called=bool(mutating),
            state_mutated=state_mutated,
            api_docs_consulted=any(c.app == "api_docs" for c in calls),
            syntax_error=not code_facts.syntax_ok or out.exception_type == "SyntaxError",
            execution_failed=out.execution_failed,
            exception_type=out.exception_type,
            timed_out=out.timed_out,
            api_error=out.api_error,
            api_error_codes=out.api_error_codes,
            api_error_messages=out.api_error_messages,
            login_apps=logins,
            authenticated_apps=sorted(episode.authenticated),
            passwords_fetched=any(c.api == "show_account_passwords" for c in calls),
            uses_access_token=any("access_token" in c.arguments for c in calls),
            paginated_apis=sorted(set(paginated)),
            pagination_advanced=advanced,
            complete_task_called=complete_called,
            answer_given=answer_given,
            task_completed=episode.completed,
            imports=code_facts.imports,
            has_loop=code_facts.has_loop,
            printed_output=out.printed,
            output_chars=len(output),
            emails_seen=out.emails[:50],
            secret_in_output=bool(out.secret_kinds),
            secret_kinds=out.secret_kinds,
            code_lines=code_facts.lines,
        )
        error_text = "\n".join(output.strip().splitlines()[-3:]) if out.execution_failed else ""
        return EngineStep(
            observation=observation,
            state_signature=episode.signature(),
            entities=out.entity_ids + out.emails,
            context_key=episode.context_key(),
            benchmark_facts=facts,
            reward=reward,
            terminated=episode.completed,
            accepted=not out.execution_failed,
            error_text=error_text,
        )

    def _evaluate(self) -> dict[str, Any]:
        result = self._call("evaluate", suppress_errors=True)
        passes, failures = result.get("passes", []), result.get("failures", [])
        num_tests = int(result.get("num_tests") or len(passes) + len(failures))
        return {
            "success": bool(result.get("success")),
            "pass_count": len(passes),
            "num_tests": num_tests,
            "pass_fraction": len(passes) / num_tests if num_tests else 0.0,
            "failed_requirements": [f.get("requirement", "") for f in failures],
            "difficulty": result.get("difficulty"),
        }

    def binding(self) -> AppWorldBinding:
        if self._episode is None:
            raise RuntimeError("reset() first")
        return self._episode.binding

    def outcome(self) -> Outcome:
        """AppWorld's own evaluation; ``detail`` carries the TGC-style pass fraction."""
        episode = self._episode
        if episode is None:
            return Outcome()
        if episode.evaluation is None and self._world_open and episode.failure is None:
            try:
                episode.evaluation = self._evaluate()
            except EngineFailure as exc:
                return Outcome(detail={"error": str(exc)})
        if episode.evaluation is None:
            return Outcome(detail={"error": episode.failure or "not evaluated"})
        ev = episode.evaluation
        return Outcome(success=ev["success"], score=1.0 if ev["success"] else 0.0,
                       detail={**ev, "task_completed": episode.completed, "task_id": episode.task_id})

    def render_state(self) -> str:
        return self._episode.context_key() if self._episode else ""

    # -- teardown --------------------------------------------------------------------------
    def _close_world(self) -> None:
        if self._world_open and self._client is not None and self._episode is not None:
            try:
                self._client.call("close", task_id=self._episode.task_id, timeout_s=10.0)
            except ServerCallError:
                self.server.kill()
        self._world_open = False

    def close(self) -> None:
        self._close_world()
        if self._client is not None:
            self._client.close()
            self._client = None
        self.server.stop()
        shutil.rmtree(self.data_root / "experiments" / "outputs" / self.experiment_name, ignore_errors=True)

