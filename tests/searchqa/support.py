"""Helpers the SearchQA tests share (imported as ``searchqa.support``; tests/ is on the path)."""

from __future__ import annotations

from rubricgym.benchmark import ExpertAction

GRAMMARS = ("search-r1", "trca")


def respond(action: ExpertAction | str, grammar: str) -> str:
    """An agent response carrying one action in the grammar's format."""
    if isinstance(action, str):
        action = ExpertAction(action)
    tag = action.kind or ("action" if grammar == "trca" else "search")
    return f"<think>next step</think><{tag}>{action.content}</{tag}>"
