"""A benchmark's action surface as tools: what a tool-calling agent is offered (TRL's
``environment_factory``, an endpoint's function calling), and how one call becomes the env's
action, so the rubric scores a tool call exactly as the same ``<action>`` of rubricgym's own
prompts.

A benchmark declares its surface in its ``BenchmarkSpec.tool_surface``: a reference to a
function of the env's construction options (the env id's kwargs merged with the caller's)
returning its ``ToolSpec``s, or ``"none"`` when its actions are not tool calls. A benchmark
that declares nothing gets one tool, ``act(command)``, whose command is the action text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubricgym.benchmark import NO_TOOL_SURFACE, load_ref
from rubricgym.parsing import ExpertAction, TagGrammar
from rubricgym.registration import env_ids, get_spec, is_client_env_id
from rubricgym.untrusted import clean_json

__all__ = ["ACT_TOOL", "NoToolSurface", "RESERVED_TOOL_NAMES", "ToolSpec", "response_from_tool_calls", "tool_surface"]

# names an environment class for TRL already uses (TRL calls reset and get_reward itself)
RESERVED_TOOL_NAMES = frozenset({"reset", "get_reward", "step_records", "env", "view", "done", "tool_specs"})


class NoToolSurface(ValueError):
    """The benchmark's actions are not tool calls (it declared ``tool_surface="none"``)."""


class ToolSpec(BaseModel):
    """One tool: its OpenAI-style function schema, and how a call renders as the env's action.

    ``content="argument"``: the action's text is the value of the string parameter
    ``argument`` (``act(command)``, a code tool's ``execute(code)``, a ``respond(message)``
    to a user simulator). ``content="json_call"``: the action is the call itself as
    ``{"name": ..., "arguments": {...}}`` (a benchmark whose actions are JSON tool calls). ``kind`` names the
    grammar's action tag (``None``: its first).
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    description: str
    parameters: dict[str, Any] = Field(description="a JSON schema of type object")
    content: Literal["argument", "json_call"] = "argument"
    argument: str = ""
    kind: str | None = None
    plain_text: bool = Field(False, description="a reply of text and no call is this tool's call with the text")

    @model_validator(mode="after")
    def _check(self) -> ToolSpec:
        if self.name in RESERVED_TOOL_NAMES:
            raise ValueError(f"tool name {self.name!r} is reserved (reserved: {sorted(RESERVED_TOOL_NAMES)})")
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: parameters must be a JSON schema of type 'object'")
        if self.plain_text and self.content != "argument":
            raise ValueError(f"tool {self.name!r}: only a tool whose argument is the action text takes plain text")
        if self.content == "argument":
            prop = self.properties.get(self.argument)
            if not isinstance(prop, dict) or prop.get("type") != "string":
                raise ValueError(f"tool {self.name!r}: its argument {self.argument!r} must be a string parameter")
        return self

    @property
    def properties(self) -> dict[str, Any]:
        props = self.parameters.get("properties") or {}
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        return [str(r) for r in self.parameters.get("required") or []]

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools=`` entry."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def action(self, arguments: Mapping[str, Any]) -> ExpertAction:
        """The env action one call of this tool stands for (the grammar renders it)."""
        if self.content == "json_call":
            return ExpertAction(json.dumps({"name": self.name, "arguments": dict(arguments)}), self.kind)
        return ExpertAction(str(arguments.get(self.argument, "")), self.kind)


ACT_TOOL = ToolSpec(
    name="act", description="Take one action in the environment and see what happens.",
    parameters={"type": "object", "required": ["command"], "properties": {"command": {
        "type": "string", "description": 'one admissible action, exactly as listed (e.g. "go to drawer 1").'}}},
    argument="command")


def tool_surface(env_id: str, /, **make_kwargs: Any) -> list[ToolSpec]:
    """The tools of ``env_id`` made with ``make_kwargs``: the benchmark's declared surface,
    or ``[ACT_TOOL]`` when it declares none. ``NoToolSurface`` when it declared ``"none"``.
    A client env id (a served env) offers the surface of the env id it names in ``env_id``
    when that benchmark is installed here, else ``[ACT_TOOL]`` (the served env's own action
    text, whatever its benchmark)."""
    if is_client_env_id(env_id):
        served = make_kwargs.get("env_id")
        if isinstance(served, str) and not is_client_env_id(served) and served in env_ids():
            return tool_surface(served)
        return [ACT_TOOL]
    spec = get_spec(env_id)
    declared = spec.tool_surface
    if declared == NO_TOOL_SURFACE:
        raise NoToolSurface(f"{spec.name} declares no tool surface (BenchmarkSpec.tool_surface='none'): its actions "
                            f"are not tool calls; train {env_id} through rubricgym_rollout_func (the text route)")
    if declared is None:
        return [ACT_TOOL]
    tools = list(load_ref(declared)(**{**spec.env_id(env_id).kwargs, **make_kwargs}))
    if not tools or not all(isinstance(t, ToolSpec) for t in tools):
        raise TypeError(f"{spec.name}'s tool surface {declared} must return a non-empty list of ToolSpec")
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"{spec.name}'s tool surface names a tool twice: {sorted(n for n in names if names.count(n) > 1)}")
    return tools


def response_from_tool_calls(tools: Sequence[ToolSpec], calls: Sequence[tuple[str, str]], text: str,
                             grammar: TagGrammar, reasoning: str = "tool call") -> str:
    """The env response a function-calling reply stands for (``calls``: ``(name, arguments
    JSON)`` pairs as the endpoint sent them). One known call: its action in the env's format.
    Several calls: one action block each, which the env scores as several actions. A call
    the surface lacks, or arguments that are not a JSON object, goes to the env as the call's
    JSON, which the env scores as the action it cannot run (never dropped). No call: the text, as the ``plain_text`` tool's
    call when the surface has one (e.g. words to a simulated user), else as it came."""
    by_name = {t.name: t for t in tools}
    if not calls:
        talker = next((t for t in tools if t.plain_text), None)
        return grammar.render(talker.action({talker.argument: text}), reasoning=reasoning) if talker and text else text
    blocks = []
    for name, raw in calls:
        tool = by_name.get(name)
        try:
            arguments = clean_json(json.loads(raw)) if raw.strip() else {}  # "\ud800" escapes decode to surrogates
        except ValueError:
            arguments = None
        if tool is None or not isinstance(arguments, dict):  # the call as JSON: the env scores what it can't run
            bad = ExpertAction(json.dumps({"name": name, "arguments": raw if arguments is None else arguments}))
            blocks.append(grammar.render(bad, reasoning=reasoning))
            continue
        blocks.append(grammar.render(tool.action(arguments), reasoning=reasoning))
    return "".join(blocks)
