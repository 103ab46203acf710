"""AppWorld's tool surface: one tool, ``execute(code)``, running a block of Python in the
task's sandboxed shell (the same action as one ```python block of the text protocol)."""

from __future__ import annotations

from typing import Any

from rubricgym.tool_surface import ToolSpec

EXECUTE = ToolSpec(
    name="execute",
    description="Run Python code in the task's shell (the `apis` object calls the apps; print what you need to "
                "see) and get its output. Call apis.supervisor.complete_task() when the task is done.",
    parameters={"type": "object", "required": ["code"], "properties": {"code": {
        "type": "string", "description": "the Python code to run"}}},
    argument="code")


def tool_surface(**_options: Any) -> list[ToolSpec]:
    return [EXECUTE]
