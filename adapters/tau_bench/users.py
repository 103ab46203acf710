"""User simulators for tau-bench: a scripted user (tests, offline training) and an LLM user.

Both subclass tau2's ``UserSimulator`` and keep its state handling, so tau2's orchestrator,
stop tokens (``###STOP###``, ``###TRANSFER###``) and evaluator treat them like its own user.

- ``ScriptedUser`` opens with the task's user facts (reason for the call and what the user
  knows), performs the task's gold user-side device actions (telecom) when the agent has
  done the agent-side actions that precede them, confirms agent questions, and stops once
  nothing is left to do or after ``patience`` idle replies. Deterministic.
- ``LLMUser`` asks an OpenAI-compatible chat server (tau2's own user system prompt); its
  settings mirror the judge client's; the key is read from the environment variable named
  by ``api_key_env`` when the client is built, never stored, and redacted from the replies
  (a server echoing it cannot put it into an observation or a trajectory).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubricgym.adapters.tau_bench.engine import Task, Tool, ToolMessage, UserMessage
from rubricgym.bounded_http import DEFAULT_MAX_REPLY_BYTES, bounded_http_client
from rubricgym.judges.client import classify_transport_error, retryable_transport_error
from rubricgym.secret_refs import read_secret, redact, redact_json, refuse_inline_secrets
from tau2.data_model.message import MultiToolMessage, ToolCall
from tau2.user.base import STOP, TRANSFER, UserState
from tau2.user.user_simulator import UserSimulator
from tau2.utils.llm_utils import to_litellm_messages

CONFIRM = "Yes, please go ahead."


class UserSimulatorFailure(RuntimeError):
    """The user simulator could not answer (server down, timeout, bad reply): an engine failure."""


class ScriptedUserConfig(BaseModel):
    """How the scripted user behaves beyond replaying the task's facts."""

    patience: int = Field(2, ge=0, description="agent messages answered with a plain confirmation before the user stops")
    skip_gold_actions: list[int] = Field(default_factory=list,
                                         description="indices of gold user-side actions not to perform (ablations)")
    device_actions: bool = Field(True, description="perform the task's gold user-side actions at all (telecom)")


def opening_line(task: Task) -> str:
    """The user's first message: why they call and what they know (never the unknowns or gold actions)."""
    ins = task.user_scenario.instructions
    if isinstance(ins, str):
        text = ins
    else:
        text = " ".join(p for p in (getattr(ins, "reason_for_call", None), getattr(ins, "known_info", None)) if p)
    return "Hi. " + re.sub(r"\s+", " ", text).strip()


class ScriptedUser(UserSimulator):
    """Replays the task's user facts and (telecom) gold user-side actions; see the module doc."""

    def __init__(self, task: Task, tools: list[Tool] | None, agent_calls: Callable[[], list[ToolCall]],
                 config: ScriptedUserConfig | None = None):
        super().__init__(tools=tools, instructions=task.user_scenario, llm="scripted")
        self.config = config or ScriptedUserConfig()
        actions = list(task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
        self._agent_gold = [(i, a) for i, a in enumerate(actions) if a.requestor != "user"]
        self._user_gold = [(i, a) for i, a in enumerate(actions) if a.requestor == "user"
                           and self.config.device_actions and i not in set(self.config.skip_gold_actions)]
        self._agent_calls = agent_calls
        self._opening = opening_line(task)
        self._opened = False
        self._queue: list[Any] = []  # user tool calls of the group in progress
        self._done_user: set[int] = set()
        self._idle = 0
        self._n_calls = 0

    def set_seed(self, seed: int) -> None:  # deterministic
        pass

    def _agent_done(self, index: int) -> bool:
        """Every agent-side gold action before gold action ``index`` has a matching agent call."""
        calls = self._agent_calls()
        return all(any(a.compare_with_tool_call(c) for c in calls) for i, a in self._agent_gold if i < index)

    def _due_group(self) -> list[tuple[int, Any]]:
        """The next run of gold user actions (up to the next agent-side gold action), once it is due."""
        pending = [(i, a) for i, a in self._user_gold if i not in self._done_user]
        if not pending or not self._agent_done(pending[0][0]):
            return []
        first = pending[0][0]
        bound = min((i for i, _ in self._agent_gold if i > first), default=10**9)
        return [(i, a) for i, a in pending if i < bound]

    def _all_done(self) -> bool:
        return len(self._done_user) == len(self._user_gold) and self._agent_done(10**9)

    def _reply(self, content: str | None = None, call: ToolCall | None = None) -> UserMessage:
        if call is not None:
            return UserMessage(role="user", tool_calls=[call])
        return UserMessage(role="user", content=content)

    def _next(self, message: Any) -> UserMessage:
        if self._queue:
            i, a = self._queue.pop(0)
            self._done_user.add(i)
            self._n_calls += 1
            return self._reply(call=ToolCall(id=f"user_call_{self._n_calls}", name=a.name,
                                             arguments=dict(a.arguments), requestor="user"))
        if isinstance(message, (ToolMessage, MultiToolMessage)):  # the group just finished
            return self._reply("I did that on my phone. What should I do next?")
        if not self._opened:
            self._opened = True
            return self._reply(self._opening)
        calls = self._agent_calls()
        if calls and calls[-1].name == "transfer_to_human_agents":
            return self._reply(TRANSFER)
        group = self._due_group()
        if group:
            self._queue = group
            self._idle = 0
            return self._next(None)
        if self._all_done():
            return self._reply(STOP)
        self._idle += 1
        return self._reply(STOP if self._idle > self.config.patience else CONFIRM)

    def _generate_next_message(self, message: Any, state: UserState) -> tuple[UserMessage, UserState]:
        if isinstance(message, MultiToolMessage):
            state.messages.extend(message.tool_messages)
        elif message is not None:
            state.messages.append(message)
        reply = self._next(message)
        state.messages.append(reply)
        return reply, state


class LLMUserSettings(BaseModel):
    """The LLM user's client settings (the judge client's fields; the key only by reference)."""

    model_config = ConfigDict(hide_input_in_errors=True)  # an error must never echo a key

    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    model: str = "gpt-4o-mini"
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the key (read, never stored)")
    api_key_file: str | None = Field(None, description="file whose first line is the key (instead of api_key_env)")
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = 0
    max_tokens: int = Field(200, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    max_reply_bytes: int = Field(DEFAULT_MAX_REPLY_BYTES, gt=0, description="larger replies are refused while read")
    max_transport_retries: int = Field(3, ge=0)
    backoff_initial_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(8.0, ge=0)
    send_tools: bool = Field(True, description="offer the user's device tools (telecom) to the model")

    @model_validator(mode="before")
    @classmethod
    def _no_inline_key(cls, data: Any) -> Any:
        refuse_inline_secrets(data, "LLM user settings", prefix="user.")
        return data

    @classmethod
    def from_judge_settings(cls, judge: Any, **overrides: Any) -> LLMUserSettings:
        """Same server, model, key reference (the variable or file name, never the key) and
        transport limits as a ``JudgeSettings``."""
        fields = {k: getattr(judge, k) for k in ("base_url", "model", "api_key_env", "api_key_file", "temperature",
                                                 "top_p", "seed", "timeout_s", "max_reply_bytes",
                                                 "max_transport_retries", "backoff_initial_s", "backoff_max_s")}
        return cls(**{**fields, **overrides})


class LLMUser(UserSimulator):
    """tau2's user simulator prompt, answered by an OpenAI-compatible server with bounded retries."""

    def __init__(self, task: Task, tools: list[Tool] | None, settings: LLMUserSettings):
        super().__init__(tools=tools, instructions=task.user_scenario, llm=settings.model)
        self.settings = settings
        self._seed = settings.seed
        self._client: Any = None

    def set_seed(self, seed: int) -> None:
        self._seed = seed if self.settings.seed is not None else None

    def client(self) -> Any:
        if self._client is None:
            import openai  # lazy: only the LLM user needs it

            secret = read_secret(self.settings.api_key_env, self.settings.api_key_file)
            key = secret.get_secret_value() if secret is not None else ""
            self._client = openai.OpenAI(base_url=self.settings.base_url, api_key=key or "no-key",
                                         max_retries=0, timeout=self.settings.timeout_s,
                                         http_client=bounded_http_client(self.settings.max_reply_bytes,
                                                                         self.settings.timeout_s))
        return self._client

    def _request(self, messages: list[dict[str, Any]]) -> Any:
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential  # lazy: LLM user only

        kwargs: dict[str, Any] = {"model": self.settings.model, "messages": messages,
                                  "max_tokens": self.settings.max_tokens, "temperature": self.settings.temperature}
        if self.settings.top_p is not None:
            kwargs["top_p"] = self.settings.top_p
        if self._seed is not None:
            kwargs["seed"] = self._seed
        if self.tools and self.settings.send_tools:
            kwargs["tools"] = [t.openai_schema for t in self.tools]
        retrying = Retrying(retry=retry_if_exception(retryable_transport_error),
                            stop=stop_after_attempt(self.settings.max_transport_retries + 1),
                            wait=wait_exponential(multiplier=self.settings.backoff_initial_s,
                                                  max=self.settings.backoff_max_s), reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    return self.client().chat.completions.create(**kwargs)
        except Exception as exc:  # classified; never echoes headers or the key
            raise UserSimulatorFailure(f"user simulator: {classify_transport_error(exc)}") from None
        raise UserSimulatorFailure("user simulator: no attempt")  # pragma: no cover

    def _generate_next_message(self, message: Any, state: UserState) -> tuple[UserMessage, UserState]:
        if isinstance(message, MultiToolMessage):
            state.messages.extend(message.tool_messages)
        elif message is not None:
            state.messages.append(message)
        messages = [_clean(m) for m in to_litellm_messages(state.system_messages + state.flip_roles())]
        resp = self._request(messages)
        choices = getattr(resp, "choices", None)
        if not choices or choices[0].message is None:
            raise UserSimulatorFailure("user simulator: the server's reply has no message")
        msg = choices[0].message
        calls = [ToolCall(id=redact(tc.id or f"user_call_{i}"), name=redact(tc.function.name),
                          arguments=redact_json(_args(tc.function.arguments)), requestor="user")
                 for i, tc in enumerate(getattr(msg, "tool_calls", None) or [])
                 if getattr(tc, "function", None) is not None]
        if calls:
            reply = UserMessage(role="user", tool_calls=calls[:1])  # one device action per user turn
        else:
            text = redact((msg.content or "").strip()) or CONFIRM  # an empty reply is not a message tau2 accepts
            reply = UserMessage(role="user", content=text)
        state.messages.append(reply)
        return reply, state


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    """OpenAI chat format without nulls (llama.cpp rejects ``tool_calls: null``)."""
    out = {k: v for k, v in message.items() if v is not None}
    if out.get("role") == "assistant" and "tool_calls" in out:
        out["tool_calls"] = [{k: v for k, v in tc.items() if k != "name"} for tc in out["tool_calls"]]
    if "content" not in out:
        out["content"] = ""
    return out


def _args(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
