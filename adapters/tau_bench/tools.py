"""tau-bench's tool surface: the domain's agent tools with tau2's own JSON schemas, plus
``respond(message)``, a turn of words to the user (a tool-calling loop such as TRL's has no
user turns of its own; the env's user simulator answers it)."""

from __future__ import annotations

from typing import Any

from rubricgym.adapters.tau_bench.engine import domain as load_domain
from rubricgym.tool_surface import ToolSpec

RESPOND = ToolSpec(
    name="respond",
    description="Say something to the customer (a question, an answer or a confirmation) and get their reply. "
                "End the conversation with a message containing ###STOP### once the request is resolved.",
    parameters={"type": "object", "required": ["message"], "properties": {"message": {
        "type": "string", "description": "what to tell the customer"}}},
    argument="message", plain_text=True)


def tool_surface(domain: str = "retail", **_options: Any) -> list[ToolSpec]:
    """The tools of ``domain``'s agent (one JSON call each) and ``respond``."""
    loaded = load_domain(domain)
    schemas = loaded.tool_schemas(loaded.environment())
    tools = [ToolSpec(name=s["function"]["name"], description=s["function"].get("description") or "",
                      parameters=s["function"].get("parameters") or {"type": "object", "properties": {}},
                      content="json_call") for s in schemas]
    return [*tools, RESPOND]
