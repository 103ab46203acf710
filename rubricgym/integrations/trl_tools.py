"""A rubricgym env as a class for TRL's ``environment_factory`` (tool-calling route).

TRL makes one instance per concurrent rollout, calls ``reset(**row)`` (its text is appended to
the prompt), exposes every public method as a tool (its signature and the docstring's
``Args:`` are the schema) and reads ``get_reward()`` (the episode's rubric reward) as a reward
column. The tools are the benchmark's declared surface (``rubricgym.tool_surface``): text envs
get one ``act(command)``, tau-bench its domain tools plus ``respond(message)``, AppWorld
``execute(code)``. Each call goes to the env as the action it stands for, rendered in the env's
own format, so the rubric scores it exactly as that ``<action>`` of rubricgym's own prompts.
No TRL import here.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any, Optional

import gymnasium as gym

from rubricgym.integrations.trl_rollout import MissingSeed
from rubricgym.prompts import EpisodeView, PromptSettings, build_messages
from rubricgym.registration import check_env_id
from rubricgym.tool_surface import ToolSpec, tool_surface

__all__ = ["ENDED", "rubricgym_environment"]

ENDED = "The episode has ended: no further actions are taken."
_JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                                "object": dict}


def rubricgym_environment(env_id: str, /, *, prompt: PromptSettings | None = None, reasoning: str = "tool call",
                          **make_kwargs: Any) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` playing ``env_id`` (``gym.make``
    gets ``make_kwargs``). Each instance keeps its episode's step records (``step_records``:
    tool, arguments, the action's text, rewards, context key and the rubric's records per step)
    after the episode. ``reasoning`` fills the env format's reasoning part of each action (a
    tool call has none). ``NoToolSurface`` for a benchmark that declares its actions are not
    tool calls."""
    env_id = check_env_id(env_id)
    settings = prompt or PromptSettings(style="chat")
    tools = tool_surface(env_id, **make_kwargs)

    class RubricgymEnvironment:
        """One rubricgym env behind TRL's tool loop; its tools are the benchmark's surface."""

        tool_specs: tuple[ToolSpec, ...] = tuple(tools)

        def __init__(self) -> None:
            self.env = gym.make(env_id, **make_kwargs)
            self.view: EpisodeView | None = None
            self.step_records: list[dict[str, Any]] = []
            self.done = False

        def reset(self, **row: Any) -> str:
            if row.get("seed") is None:
                raise MissingSeed("a prompt row has no 'seed': every row needs one so that its G copies start from "
                                  "one initial state; build rows with rubricgym_dataset(env_id, seeds=...)")
            task_id = row.get("task_id")
            obs, info = self.env.reset(seed=int(row["seed"]), options={"task_id": task_id} if task_id else None)
            self.view = EpisodeView.start(self.env, obs, info)
            self.step_records, self.done = [], False
            return self._current()

        def get_reward(self) -> float:
            """The episode's rubric reward: the env's step rewards summed (with the TRCA reward
            wrapper, r_TRCA per step plus the engine's outcome)."""
            return sum(r["reward"] for r in self.step_records)

        def _call(self, tool: ToolSpec, arguments: dict[str, Any]) -> str:
            """One tool call as one env step (after the episode: ``ENDED``, nothing runs)."""
            if self.view is None or self.done:
                return ENDED
            arguments = {k: v for k, v in arguments.items() if v is not None}
            action = tool.action(arguments)
            response = self.view.grammar.render(action, reasoning=reasoning)
            obs, reward, terminated, truncated, info = self.env.step(response)
            transition = info.get("transition")
            self.step_records.append({
                "tool": tool.name, "arguments": arguments, "command": action.content, "reward": float(reward),
                "env_reward": float(transition.env_reward) if transition is not None else float(reward),
                "context_key": transition.context_key if transition is not None else "",
                "rubric": info.get("rubric", {}), "terminated": bool(terminated), "truncated": bool(truncated),
            })
            self.view.record(response, obs, info)
            if terminated or truncated:
                self.done = True
                return f"{obs}\n\n{ENDED}"
            return self._current()

        def _current(self) -> str:
            assert self.view is not None
            return build_messages(self.view, settings)[-1]["content"]

        def _close(self) -> None:
            self.env.close()

    for tool in tools:
        setattr(RubricgymEnvironment, tool.name, tool_method(tool))
    RubricgymEnvironment.__name__ = RubricgymEnvironment.__qualname__ = "RubricgymEnvironment"
    return RubricgymEnvironment


def tool_method(tool: ToolSpec) -> Callable[..., str]:
    """A method whose signature, type hints and Google-style docstring say ``tool``'s schema
    (what transformers' ``get_json_schema`` reads for the chat template's tool list)."""

    properties, required = tool.properties, set(tool.required)
    ordered = [*(n for n in properties if n in required), *(n for n in properties if n not in required)]

    def method(self: Any, *positional: Any, **arguments: Any) -> str:
        # positional values fill the parameters in schema order; unknown keywords (a model's
        # mistake) go to the env, which scores the malformed call
        return self._call(tool, {**dict(zip(ordered, positional)), **arguments})
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    lines = []
    for name in ordered:
        schema = properties[name] if isinstance(properties[name], dict) else {}
        hint = python_type(schema)
        hints[name] = hint if name in required else Optional[hint]  # noqa: UP045 (a runtime object, not syntax)
        default = inspect.Parameter.empty if name in required else None
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                        annotation=hints[name]))
        text = " ".join(str(schema.get("description") or name).split())
        if isinstance(schema.get("enum"), list):
            text += f" (choices: {json.dumps(schema['enum'])})"
        lines.append(f"    {name}: {text}")
    hints["return"] = str
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = hints
    method.__name__ = method.__qualname__ = tool.name
    summary = " ".join(tool.description.split()) or tool.name
    method.__doc__ = summary + ("\n\nArgs:\n" + "\n".join(lines) if lines else "") + \
        "\n\nReturns:\n    What the environment shows next."
    return method


def python_type(schema: dict[str, Any]) -> Any:
    """The Python type hint of a JSON schema (nullable and ``anyOf`` forms: the first non-null)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None and isinstance(schema.get("anyOf"), list):
        options = [s for s in schema["anyOf"] if isinstance(s, dict) and s.get("type") != "null"]
        return python_type(options[0]) if options else str
    if kind == "array":
        items = schema.get("items")
        return list[python_type(items)] if isinstance(items, dict) and items.get("type") else list
    return _JSON_TYPES.get(str(kind), dict if "properties" in schema else str)
