"""``AppWorldAdapter``: AppWorld tasks behind ``RubricEnv``, executed by AppWorld's own
environment server (its own venv, its own process, inside an OS sandbox: ``sandbox.py``);
agent code never runs in ours, the apps and their databases live outside its sandbox
(``serve_apps.py``), and evaluation runs where agent code never runs."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricgym import Adapter, EngineFailure, EngineReset, EngineStep, Outcome, ParsedAction, PolicyFailure
from rubricgym.adapters.appworld.apis_client import APIS_URL
from rubricgym.adapters.appworld.binder import bind_task
from rubricgym.adapters.appworld.engine import AppWorldServer, EnvironmentClient, ServerCallError
from rubricgym.adapters.appworld.evaluator import EvaluatorError, SandboxedEvaluator
from rubricgym.adapters.appworld.facts import AppWorldBinding, AppWorldFacts
from rubricgym.adapters.appworld.grammar import CODE_GRAMMAR, code_of
from rubricgym.adapters.appworld.observe import ObservedEpisode
from rubricgym.adapters.appworld.paths import OFFICIAL_SPLITS, official_data_root, offline_data_root
from rubricgym.adapters.appworld.sandbox import check_sandbox
from rubricgym.adapters.appworld.usage import Census
from rubricgym.servers import sweep_stale

log = logging.getLogger(__name__)
BROKEN_SERVER_FACTS = {"execution_failed": True, "exception_type": "BrokenServer"}  # code_failed fires
# what a sandbox killed for a limit is recorded as (facts of the failed step: code_failed fires)
LIMIT_FACTS = {
    "cpu": {"exception_type": "BrokenServer", "resource_limit": "cpu"},
    "memory": {"exception_type": "SandboxMemoryLimit", "resource_limit": "memory"},
    "disk": {"exception_type": "OutputsQuota", "resource_limit": "disk"},
    "leftover": {"exception_type": "LeftWorkRunning"},
}
LEFTOVER_GRACE_S = 0.2  # a process or thread the code started may take this long to end after the step
EXPERIMENT_PREFIX = "rubricgym_"  # AppWorld experiment folders: rubricgym_<pid>_<random>
IDLE_CPU_S, IDLE_CPU_SHARE = 1.0, 0.2  # CPU a server may use between steps: 1 s + 20% of the wall time
OFFLINE_SPLITS = {"default": "train", "offline_train": "train", "offline_dev": "dev", "offline_all": None}
SPLITS = (*OFFLINE_SPLITS, *OFFICIAL_SPLITS)
PROMPT = """Task: {instruction}
I am {first_name} {last_name} (email {email}, phone {phone_number}); it is now {datetime}.
Solve the task by writing Python code, one block per step; I run it and show you its output.
Call apps as apis.<app>.<api>(...). Find apps and APIs with apis.api_docs.show_app_descriptions(),
apis.api_docs.show_api_descriptions(app_name=...) and apis.api_docs.show_api_doc(app_name=..., api_name=...).
My account passwords: apis.supervisor.show_account_passwords(). When done call
apis.supervisor.complete_task() (with answer=... if the task asks a question).
Reply with <action>code</action> or a ```python code block."""


class ServerBroken(EngineFailure):
    """The server broke; ``limit`` names what a watchdog or the check after a step killed its
    sandbox for ("cpu", "memory", "disk", "leftover"), None when nothing did (it died, hung or
    answered garbage). A step turns it into a ``PolicyFailure`` with ``LIMIT_FACTS[limit]``."""

    def __init__(self, message: str, limit: str | None = None):
        super().__init__(message)
        self.limit = limit


@dataclass
class _Episode:
    task_id: str
    instruction: str
    binding: AppWorldBinding
    observed: ObservedEpisode = field(default_factory=ObservedEpisode)
    evaluation: dict[str, Any] | None = None
    failure: str | None = None
    steps: int = 0


class AppWorldAdapter(Adapter):
    """One AppWorld environment server per adapter, reused across episodes (one world at a time).

    ``step_timeout_s`` is AppWorld's own execution limit; the HTTP call gets
    ``step_timeout_s + call_margin_s`` and a server that misses it is killed as hung. World
    initialization and evaluation get ``setup_timeout_s`` (a cold server loads its apps then).
    ``step_cpu_s`` is the CPU budget of one execution (stopped inside the server; a server
    still busy ``cpu_grace_s`` later, in C code, is killed); ``memory_cap_gb`` caps the
    server's address space (0: no cap) and, sandboxed, everything its sandbox holds in memory
    (every process's resident set plus its ``/tmp``, whose size it also is), watched while each
    step runs and checked after it; ``outputs_cap_mb`` is the quota of the outputs folder (0:
    none). Past either the sandbox is killed and the step is a policy failure. So is a step
    whose code leaves a process or a thread behind. A server left above half its cap is
    restarted at reset; sandboxed, each episode starts with an empty ``/tmp`` and outputs folder.
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
        step_cpu_s: float = 10.0,
        cpu_grace_s: float = 2.0,
        memory_cap_gb: float = 4.0,
        sandbox: bool = True,
        outputs_cap_mb: float = 256.0,
    ):
        if split not in SPLITS:
            raise ValueError(f"AppWorld split must be one of {SPLITS}, got {split!r}")
        if int(step_timeout_s) < 1:
            raise ValueError("step_timeout_s must be >= 1 (AppWorld's limit is whole seconds)")
        if step_cpu_s < 0 or cpu_grace_s < 0 or memory_cap_gb < 0 or outputs_cap_mb < 0:
            raise ValueError("step_cpu_s, cpu_grace_s, memory_cap_gb and outputs_cap_mb must be >= 0 (0 disables)")
        if 0 < memory_cap_gb < 1:
            raise ValueError("memory_cap_gb below 1 cannot hold AppWorld's server (about 0.6 GB at rest)")
        self.split = split
        if data_root is not None:
            self.data_root = Path(data_root).resolve()
        else:
            self.data_root = offline_data_root() if split in OFFLINE_SPLITS else official_data_root(split)
        self.step_timeout_s = int(step_timeout_s)
        self.call_timeout_s = self.step_timeout_s + float(call_margin_s)
        self.setup_timeout_s = float(setup_timeout_s)  # world init / evaluation: our code, not the agent's
        self.max_observation_chars = max_observation_chars
        self.step_cpu_s = float(step_cpu_s)
        self.cpu_grace_s = float(cpu_grace_s)
        self.memory_cap_bytes = int(memory_cap_gb * 1024**3) or None
        self.outputs_cap_bytes = int(outputs_cap_mb * 1024**2) or None
        self._task_meta, self._task_ids = self._load_tasks()
        self.sandboxed = bool(sandbox)
        if self.sandboxed:
            check_sandbox()  # refuse here, with the how-to, rather than at the first reset
        else:
            log.warning("AppWorld runs agent code WITHOUT the OS sandbox (sandbox=False): it has the server's "
                        "rights, held only by AppWorld's Python-level guards")
        self.experiment_name = f"{EXPERIMENT_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}"
        outputs_root = self.data_root / "experiments" / "outputs"
        # outputs (logs, databases) of adapters whose process was killed before close()
        sweep_stale(outputs_root, EXPERIMENT_PREFIX)
        self.outputs = outputs_root / self.experiment_name
        self.outputs.mkdir(parents=True, exist_ok=True)
        self.server = AppWorldServer(self.data_root, start_timeout_s=server_start_timeout_s,
                                     stop_grace_s=stop_grace_s, memory_cap_bytes=self.memory_cap_bytes,
                                     cpu_s=self.step_cpu_s, outputs=self.outputs if self.sandboxed else None,
                                     outputs_cap_bytes=self.outputs_cap_bytes)
        self.evaluator = (SandboxedEvaluator(self.data_root, self.server.control_socket,
                                             start_timeout_s=server_start_timeout_s,
                                             memory_cap_bytes=self.memory_cap_bytes) if self.sandboxed else None)
        self._idle_since: tuple[float, float] | None = None  # (server CPU s, monotonic s) when the last step ended
        self._client: EnvironmentClient | None = None
        self._control: EnvironmentClient | None = None  # sandboxed: the apps' control socket
        self._episode: _Episode | None = None
        self._world_open = False

    # -- tasks -----------------------------------------------------------------------------
    def _load_tasks(self) -> tuple[dict[str, dict], list[str]]:
        index_path = self.data_root / "rubricgym_index.json"
        index = json.loads(index_path.read_text()) if index_path.exists() else {}
        meta = {t["id"]: t for t in index.get("tasks", [])}
        if self.split in OFFLINE_SPLITS:
            wanted = OFFLINE_SPLITS[self.split]
            ids = [i for i, t in meta.items() if wanted is None or t.get("split", "train") == wanted]
        else:
            listing = self.data_root / "data" / "datasets" / f"{self.split}.txt"
            ids = [line.strip() for line in listing.read_text().splitlines() if line.strip()]
        if not ids:
            raise RuntimeError(f"no AppWorld tasks found under {self.data_root}")
        return meta, ids

    def task_ids(self) -> Sequence[str]:
        return self._task_ids

    @property
    def task_id(self) -> str | None:
        """The current episode's task (None before the first reset)."""
        return self._episode.task_id if self._episode is not None else None

    # -- server ----------------------------------------------------------------------------
    def _held_bytes(self) -> int | None:
        """What the server holds in memory: sandboxed, every process of its sandbox and its
        ``/tmp``; else the server's resident set (None when it is not running)."""
        census = self.server.census()
        return census.memory_bytes if census is not None else self.server.rss_bytes()

    def _clean_between_episodes(self) -> str | None:
        """Sandboxed, at reset: the sandbox of the episode that ended runs nothing and holds
        nothing into the next. Work still running (a process, or CPU used since the last step
        beyond the idle allowance: the last step's own check charged what it could see) or a
        ``/tmp`` that cannot be emptied gets the sandbox replaced before the next episode
        starts; else ``/tmp`` and the outputs folder are emptied. Returns why it was replaced."""
        census = self.server.census() if self.sandboxed and self.server.alive() else None
        if census is None:
            return None
        why = None
        extra = census.extra_pids(self.server.own_pids)
        if extra:
            why = f"{len(extra)} processes of the last episode's code were still running"
        elif self._idle_since is not None:
            used, idle_s = census.cpu_s - self._idle_since[0], time.monotonic() - self._idle_since[1]
            if used > IDLE_CPU_S + IDLE_CPU_SHARE * idle_s:
                why = f"the sandbox used {used:.1f} CPU s in the {idle_s:.1f} s after the last episode's last step"
        if why is None and not self.server.scrub():
            why = "its /tmp could not be emptied (a file held open)"
        if why is not None:
            log.warning("AppWorld sandbox replaced before task reset: %s", why)
            self.server.kill()
        return why

    def _ensure_server(self) -> EnvironmentClient:
        held = self._held_bytes()
        if held is not None and self.memory_cap_bytes and held > self.memory_cap_bytes // 2:
            log.warning("AppWorld server pid %s holds %.1f GB (cap %.1f GB); restarting it", self.server.pid,
                        held / 1024**3, self.memory_cap_bytes / 1024**3)
            self.server.kill()
        if self._client is None or not self.server.alive() or not self.server.healthy():
            if self.server.pid is not None:
                log.warning("AppWorld server %s is not healthy; restarting it", self.server.url)
            self.server.restart()
            for client in (self._client, self._control):
                if client is not None:
                    client.close()
            self._client = EnvironmentClient(self.server, self.call_timeout_s)
            self._control = EnvironmentClient(self.server, self.setup_timeout_s, control=True) if self.sandboxed else None
            self._world_open = False
        return self._client

    def _broken(self, exc: ServerCallError) -> ServerBroken:
        """Kill the server (a hung one cannot answer; a dead one is reaped); reset restarts it."""
        if not exc.hung:  # a dropped connection may be the process exiting: give it a moment to be seen
            deadline = time.monotonic() + 0.5
            while self.server.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
        died = not self.server.alive()
        code = self.server.returncode
        killed_for, detail = self.server.killed_for, self.server.killed_detail
        self.server.kill()
        self._world_open = False
        if killed_for == "cpu":
            what = (f"step exceeded its CPU budget ({self.step_cpu_s:g} s + {self.cpu_grace_s:g} s grace) "
                    "in code that ignored the in-server stop; server killed")
        elif killed_for in ("memory", "disk", "leftover"):
            what = f"sandbox killed: {detail}"
        elif died:
            what = f"server process exited (code {code})"
        else:
            what = "server hung" if exc.hung else "server error"
        message = f"AppWorld {what}" if killed_for in ("memory", "disk", "leftover") else f"AppWorld {what}: {exc}"
        if self._episode is not None:
            self._episode.failure = message
        return ServerBroken(message, killed_for)

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
        replaced = self._clean_between_episodes()
        last_error: ServerCallError | None = None
        for _ in range(2):  # a server that broke since the last episode is restarted once
            client = self._ensure_server()
            try:
                if self.sandboxed:  # the world's databases, in the apps' process; its folder, in the shell's view
                    self._control.call("open", timeout_s=self.setup_timeout_s, task_id=task_id)
                    self.server.show_task(task_id)
                task = client.call("initialize", timeout_s=self.setup_timeout_s, task_id=task_id,
                                   experiment_name=self.experiment_name,
                                   timeout_seconds=self.step_timeout_s,
                                   load_ground_truth=not self.sandboxed,  # the sandbox cannot see it
                                   remote_apis_url=APIS_URL if self.sandboxed else None)
                break
            except ServerCallError as exc:
                last_error = exc
                self.server.kill()
        else:
            raise EngineFailure(f"AppWorld could not initialize task {task_id!r}: {last_error}")
        self._world_open = True
        self._idle_since = None
        if self.evaluator is not None:
            self.evaluator.prepare(task_id)
        meta = self._task_meta.get(task_id, {})
        instruction = task["instruction"]
        self._episode = _Episode(task_id=task_id, instruction=instruction,
                                 binding=bind_task(instruction, meta.get("apps"), meta.get("operations")))
        observation = PROMPT.format(instruction=instruction, datetime=task.get("datetime", ""), **task["supervisor"])
        return EngineReset(
            observation=observation,
            instruction=instruction,
            state_signature=self._episode.observed.signature(),
            context_key=self._episode.observed.context_key(),
            info={"supervisor": task["supervisor"], "datetime": task.get("datetime"),
                  **({"sandbox_replaced": replaced} if replaced else {})},
        )

    def step(self, action: ParsedAction) -> EngineStep:
        episode = self._episode
        if episode is None or not self._world_open:
            raise EngineFailure("AppWorld world is not open (the server failed earlier in this episode)")
        code = code_of(action.action or "")
        if not self.server.alive():  # down before the action ran: not the policy's doing
            raise self._broken(ServerCallError("the server was not running when the step began"))
        episode.steps += 1
        before = self.server.census()  # sandboxed: one look at the sandbox before the code runs
        cpu_now = self._refuse_work_left_running(before)
        watch = (self.server.watch(self.step_cpu_s + self.cpu_grace_s if self.step_cpu_s else 0.0,
                                   start_cpu_s=cpu_now)
                 if self.step_cpu_s or before is not None else nullcontext())
        # the server was up with the world open before this call: whatever breaks it now (the
        # code aborted or replaced the process, hung it, spent its CPU budget, filled its memory,
        # made AppWorld raise) was caused by the action's content, so it counts against the policy
        try:
            with watch:
                result = self._call("execute_tracked", timeout_s=self.call_timeout_s, code=code)
            if not isinstance(result, dict) or not isinstance(result.get("output"), str):
                raise self._broken(ServerCallError(f"/execute_tracked sent an unexpected answer: {str(result)[:200]}"))
            if not self.server.alive():  # the apps' process, which the code reached through their APIs
                raise self._broken(ServerCallError("AppWorld's apps process exited during the step"))
            after = self._check_after_execution(before) if before is not None else None
        except EngineFailure as exc:
            limit = exc.limit if isinstance(exc, ServerBroken) else None
            facts = {**BROKEN_SERVER_FACTS, **LIMIT_FACTS.get(limit or "", {})}
            raise PolicyFailure(f"the code broke AppWorld's server: {exc}", facts) from exc
        output = result["output"]
        observed = episode.observed
        seen = observed.observe(code, output, result.get("requests") or [], result.get("limit"),
                                task_completed=lambda: self._call("task_completed"))
        reward = 0.0
        if observed.completed:
            episode.evaluation = self._evaluate()
            reward = 1.0 if episode.evaluation.get("success") else 0.0

        if after is not None:  # sandboxed: the census right after the code ran (the step's other calls: ms)
            self._idle_since = (after.cpu_s, time.monotonic())
        else:
            self._idle_since = (self.server.cpu_seconds() or 0.0, time.monotonic())  # after every call of the step
        observation = output
        if len(observation) > self.max_observation_chars:
            observation = (observation[: self.max_observation_chars]
                           + f"\n... [output truncated: {len(output)} characters in all]")
        return EngineStep(
            observation=observation,
            state_signature=observed.signature(),
            entities=seen.entities,
            context_key=observed.context_key(),
            benchmark_facts=seen.facts,
            reward=reward,
            terminated=observed.completed,
            accepted=not seen.facts["execution_failed"],
            error_text=seen.error_text,
        )

    def _check_after_execution(self, before: Census) -> Census:
        """Sandboxed, right after the step's code ran: the sandbox within its memory cap and outputs
        quota, and no process or thread the code started still there (after ``LEFTOVER_GRACE_S``
        for them to end). Otherwise the sandbox is killed, and the step is charged (``EngineFailure``
        with ``limit``; the step makes it a policy failure): leftover work belongs to the step that
        started it, never to a later step or episode."""
        server = self.server
        deadline = time.monotonic() + LEFTOVER_GRACE_S
        while True:
            census = server.census()
            if census is None:
                raise self._broken(ServerCallError("the sandbox ended during the step"))
            breach = server.over_limits(census)
            if breach is not None:
                server.kill_for(*breach)
                raise self._broken(ServerCallError(breach[1]))
            extra = census.extra_pids(server.own_pids)
            threads = census.threads - before.threads
            if not extra and not threads:
                return census
            if time.monotonic() >= deadline:
                what = (f"the code left work running after its step: {len(extra)} processes and {len(threads)} "
                        f"threads it started were still there {LEFTOVER_GRACE_S:g} s after it ({census.describe()})")
                server.kill_for("leftover", what)
                raise self._broken(ServerCallError(what))
            time.sleep(0.02)

    def _refuse_work_left_running(self, census: Census | None = None) -> float | None:
        """A server busy between steps runs work an earlier step's code left behind (what the
        check after each step cannot see: work that starts later); the policy's doing, so the
        episode ends as its failure. Returns the server's CPU seconds now (the step's watchdog
        starts from it); ``census``: a look taken just before."""
        cpu_now = census.cpu_s if census is not None else self.server.cpu_seconds()
        if self._idle_since is None or cpu_now is None:
            return cpu_now
        cpu_before, since = self._idle_since
        used = cpu_now - cpu_before
        idle_s = time.monotonic() - since
        if used > IDLE_CPU_S + IDLE_CPU_SHARE * idle_s:
            self.server.kill()
            self._world_open = False
            episode = self._episode
            assert episode is not None  # step() checked it
            message = (f"the code left work running after its step (step {episode.steps - 2} or earlier of "
                       f"this episode, counting from 0): the server used {used:.1f} CPU s in {idle_s:.1f} s between "
                       "steps; server killed")
            episode.failure = message
            raise PolicyFailure(message, {**BROKEN_SERVER_FACTS, **LIMIT_FACTS["leftover"]})
        return cpu_now

    def _evaluate(self) -> dict[str, Any]:
        if self.evaluator is not None:  # sandboxed: the evaluator reads the end state from the apps' process
            assert self._episode is not None
            try:
                result = self.evaluator.evaluate(self._episode.task_id, self.experiment_name, self.setup_timeout_s)
            except EvaluatorError as exc:
                self._episode.failure = str(exc)
                raise EngineFailure(str(exc)) from exc
        else:
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
                       detail={**ev, "task_completed": episode.observed.completed, "task_id": episode.task_id})

    def render_state(self) -> str:
        return self._episode.observed.context_key() if self._episode else ""

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
        for client in (self._client, self._control):
            if client is not None:
                client.close()
        self._client = self._control = None
        self.server.stop()
        if self.evaluator is not None:
            self.evaluator.close()
        shutil.rmtree(self.outputs, ignore_errors=True)
        if self.server.outputs_trash is not None:
            self.server.outputs_trash.remove()

