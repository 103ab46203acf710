"""``TauBenchAdapter``: tau2's official domains behind rubricgym's adapter contract.

One gym step is one agent action: one tool call (JSON in ``<action>``, our shape or OpenAI's
tool-call shape) or one message to the user. tau2's own orchestrator executes it (see
``engine``); after a message the user simulator answers (and in telecom may run device tools)
until it is the agent's turn again. When the conversation ends, tau2's evaluator gives the
terminal reward; an evaluator or user-simulator error is an ``EngineFailure``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from rubricgym import Adapter, EngineFailure, EngineReset, EngineState, EngineStep, Outcome, ParsedAction
from rubricgym.adapters.tau_bench import engine as tau
from rubricgym.adapters.tau_bench.binder import bind_task
from rubricgym.adapters.tau_bench.facts import TauBenchBinding, TauBenchFacts
from rubricgym.adapters.tau_bench.observe import AgentCall, ObservedConversation, parse_agent_action
from rubricgym.adapters.tau_bench.users import (
    LLMUser,
    LLMUserSettings,
    ScriptedUser,
    ScriptedUserConfig,
    UserSimulatorFailure,
)

PROTOCOL = (
    "Reply with <think>...</think> then exactly one <action>...</action>. The action is ONE tool call as JSON, "
    '{"name": "<tool>", "arguments": {...}} (the OpenAI tool-call JSON is accepted too), or a plain-text message '
    'to the customer. Several calls in one action execute none. Call {"name": "done", "arguments": {}} '
    "or write ###STOP### when the conversation is over."
)


class TauBenchAdapter(Adapter):
    """One tau2 domain (``retail``, ``airline``, ``telecom``, ``mock``) with a scripted or an LLM user.

    ``user="scripted"`` (default; ``scripted_user`` configures it) or ``user="llm"`` with
    ``llm_user`` (``LLMUserSettings`` fields). ``hash_reads`` also fingerprints the databases
    after tools tau2 declares read-only (the tests use it to check that declaration).
    """

    benchmark: ClassVar[str] = "TauBench"
    facts_model: ClassVar[type[TauBenchFacts]] = TauBenchFacts
    binding_model: ClassVar[type[TauBenchBinding]] = TauBenchBinding

    def __init__(self, domain: str = "retail", user: str = "scripted",
                 scripted_user: dict[str, Any] | ScriptedUserConfig | None = None,
                 llm_user: dict[str, Any] | LLMUserSettings | None = None,
                 max_errors: int = 10, hash_reads: bool = False, task_ids: Sequence[str] | None = None):
        if user not in ("scripted", "llm"):
            raise ValueError(f"user must be 'scripted' or 'llm', got {user!r}")
        self.domain = tau.domain(domain)
        self.user_kind = user
        self.scripted_config = ScriptedUserConfig.model_validate(scripted_user or {})
        self.llm_settings = LLMUserSettings.model_validate(llm_user or {}) if user == "llm" else None
        self.max_errors = max_errors
        self.hash_reads = hash_reads
        known = self.domain.order
        self._task_ids = [t for t in known if task_ids is None or t in set(task_ids)]
        if task_ids is not None and len(self._task_ids) != len(set(task_ids)):
            raise KeyError(f"unknown {domain} task ids: {sorted(set(task_ids) - set(known))}")
        self._orch: Any = None
        self._task: Any = None
        self._binding = TauBenchBinding()
        self._observed = ObservedConversation(self.domain.name, hash_reads)
        self._calls = 0
        self._reward_info: Any = None

    # -- contract -----------------------------------------------------------------------
    def task_ids(self) -> Sequence[str]:
        return list(self._task_ids)

    @tau.gc_paused
    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        if task_id not in self.domain.tasks:
            raise KeyError(f"unknown {self.domain.name} task {task_id!r}")
        self._task = task = self.domain.tasks[task_id]
        self._reward_info = None
        self._calls = 0
        self._observed = ObservedConversation(self.domain.name, self.hash_reads)
        try:
            env = self.domain.environment()
            self._orch = tau.new_orchestrator(self.domain, task, self._user(task, env), env, seed, self.max_errors)
            self._orch.initialize()
            opening = self._advance(0)
            if self._orch.done:
                raise RuntimeError(f"the conversation ended before the agent's first turn ({self._orch.termination_reason})")
        except Exception as exc:
            raise EngineFailure(f"tau2 could not start {task_id}: {type(exc).__name__}: {str(exc)[:300]}") from exc
        schemas = self.domain.tool_schemas(env)
        user_texts = tau.replies(opening).user_texts
        facts = self._observed.start(
            parameters={s["function"]["name"]: s["function"]["parameters"] for s in schemas},
            tool_types=tau.tool_types(env), user_tools=(t.name for t in self.domain.tools(env, "user") or []),
            fingerprint=tau.db_fingerprint(env), user_texts=user_texts)
        self._binding = bind_task(task.user_scenario.model_dump(mode="json"))
        conversation = self._render(opening)
        instruction = user_texts[0] if user_texts else ""
        return EngineReset(
            observation=f"{PROTOCOL}\n\nConversation so far:\n{conversation}\n\n{self._header(env, schemas)}",
            instruction=f"Help the {self.domain.name} customer: {instruction}",
            state_signature=self._observed.signature(),
            entities=self._observed.entities(),
            context_key=self._observed.context_key(),
            benchmark_facts=facts,
            info={"domain": self.domain.name, "tools": sorted(self._observed.parameters), "user": self.user_kind},
        )

    @tau.gc_paused
    def step(self, action: ParsedAction) -> EngineStep:
        if self._orch is None:
            raise EngineFailure("tau2 is not running; reset first")
        if self._orch.done:
            raise EngineFailure("the tau2 conversation already ended")
        call = parse_agent_action(action.action or "")
        if call.kind == "invalid":
            return self._invalid(call)
        self._observed.act(call, self._errors())
        message = self._assistant_message(call)
        self._calls += 1
        start = len(self._orch.trajectory)
        self._orch.agent.pending = message
        try:
            self._orch.step()
            new = self._advance(start)
        except UserSimulatorFailure as exc:
            raise EngineFailure(str(exc)) from None
        except Exception as exc:
            raise EngineFailure(f"tau2 step failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
        orch = self._orch
        terminated = bool(orch.done)
        facts = self._observed.answered(
            tau.replies(new), errors=self._errors(),
            user_stopped=terminated and orch.termination_reason == tau.TerminationReason.USER_STOP,
            termination=orch.termination_reason.value if terminated else "",
            fingerprint=lambda: tau.db_fingerprint(orch.environment))
        reward = self._evaluate() if terminated else 0.0
        observation = self._render(new[1:]) or "(no reply)"
        if terminated:
            observation += f"\n[conversation ended: {self._orch.termination_reason.value}]"
        return EngineStep(
            observation=observation,
            state_signature=self._observed.signature(),
            entities=self._observed.entities(),
            context_key=self._observed.context_key(),
            benchmark_facts=facts,
            reward=reward,
            terminated=terminated,
            accepted=not facts.get("tool_error", False),
            error_text=facts.get("result_text", "") if facts.get("tool_error") else "",
            info={"tau2_reward_info": self._reward_info.model_dump(mode="json")} if terminated else {},
        )

    def invalid_step(self, action: ParsedAction, state: EngineState) -> EngineStep:
        step = super().invalid_step(action, state)
        return step.model_copy(update={"benchmark_facts": self._observed.standing_facts(self._errors())})

    def binding(self) -> TauBenchBinding:
        return self._binding

    def outcome(self) -> Outcome:
        info = self._reward_info
        if info is None:
            return Outcome(detail={"task_id": getattr(self._task, "id", None), "domain": self.domain.name})
        db = info.db_check.db_match if info.db_check is not None else None
        return Outcome(success=info.reward >= 1.0, score=float(info.reward), detail={
            "task_id": self._task.id, "domain": self.domain.name,
            "termination": self._orch.termination_reason.value, "db_match": db,
            "reward_breakdown": {str(k.value if hasattr(k, "value") else k): v
                                 for k, v in (info.reward_breakdown or {}).items()},
        })

    def render_state(self) -> str:
        return self._observed.signature()

    def close(self) -> None:
        self._orch = None

    # -- extras -------------------------------------------------------------------------
    @property
    def task(self) -> Any:
        """The current tau2 ``Task`` (for experts and tests; the agent never sees it)."""
        return self._task

    @property
    def orchestrator(self) -> Any:
        return self._orch

    # -- internals ----------------------------------------------------------------------
    def _user(self, task: Any, env: Any) -> Any:
        tools = self.domain.tools(env, "user")
        if self.user_kind == "llm":
            assert self.llm_settings is not None
            return LLMUser(task, tools, self.llm_settings)
        return ScriptedUser(task, tools, self._agent_tool_calls, self.scripted_config)

    def _agent_tool_calls(self) -> list[Any]:
        if self._orch is None:
            return []
        return [tc for m in self._orch.trajectory if isinstance(m, tau.AssistantMessage) and m.tool_calls
                for tc in m.tool_calls]

    def _advance(self, start: int) -> list[Any]:
        """Step tau2's orchestrator until the agent is to act or the conversation ends."""
        orch = self._orch
        while not orch.done and not (orch.to_role == tau.Role.AGENT):
            orch.step()
            if orch.to_role != tau.Role.ENV and orch.num_errors >= orch.max_errors and not orch.done:
                orch.done = True  # tau2's Orchestrator.run ends the conversation here
                orch.termination_reason = tau.TerminationReason.TOO_MANY_ERRORS
        if orch.to_role != tau.Role.ENV and orch.num_errors >= orch.max_errors and not orch.done:
            orch.done = True
            orch.termination_reason = tau.TerminationReason.TOO_MANY_ERRORS
        return list(orch.trajectory[start:])

    def _evaluate(self) -> float:
        try:
            self._reward_info = tau.evaluate(self._orch)
        except Exception as exc:
            raise EngineFailure(f"tau2 evaluator failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
        return float(self._reward_info.reward)

    def _assistant_message(self, call: AgentCall) -> Any:
        if call.kind == "tool":
            tc = tau.ToolCall(id=f"call_{self._calls + 1}", name=call.name, arguments=call.arguments,
                              requestor="assistant")
            return tau.AssistantMessage(role="assistant", tool_calls=[tc])
        if call.kind == "stop" and not call.message:
            return tau.AssistantMessage(role="assistant", content="###STOP###")
        return tau.AssistantMessage(role="assistant", content=call.message)

    def _errors(self) -> int:
        """tau2's count of tool errors this episode (it ends the conversation at ``max_errors``)."""
        return int(self._orch.num_errors) if self._orch is not None else 0

    def _invalid(self, call: AgentCall) -> EngineStep:
        text = f"Invalid action ({call.error}): {call.detail}. Nothing was executed. {PROTOCOL}"
        return EngineStep(observation=text, state_signature=self._observed.signature(),
                          entities=self._observed.entities(), context_key=self._observed.context_key(),
                          benchmark_facts=self._observed.invalid_facts(call, self._errors()), accepted=False,
                          error_text=text)

    def _header(self, env: Any, tools: list[dict[str, Any]]) -> str:
        """The policy and the agent's tools (OpenAI function schemas) shown at reset."""
        return (f"You are a customer service agent in the tau2 {self.domain.name} domain. Follow the policy.\n"
                f"<policy>\n{env.get_policy()}\n</policy>\n\nTools (OpenAI function schemas):\n"
                f"{json.dumps(tools, separators=(',', ':'))}")

    @staticmethod
    def _render(messages: list[Any]) -> str:
        """What the agent sees: its own and the user's words, and its tool results (not the user's device calls)."""
        lines = []
        for m in messages:
            if isinstance(m, tau.UserMessage) and m.content:
                lines.append(f"user: {m.content}")
            elif isinstance(m, tau.AssistantMessage) and m.content:
                lines.append(f"assistant: {m.content}")
            elif isinstance(m, tau.ToolMessage) and m.requestor == "assistant":
                lines.append(f"tool: {m.content}")
        return "\n".join(lines)
