"""ALFWorld's expert player (``spec.expert``): the fast-downward planner's walkthrough."""

from __future__ import annotations

from rubricgym.adapters.alfworld.adapter import ALFWorldAdapter


def expert_actions(adapter: ALFWorldAdapter) -> list[str]:
    """The planner's walkthrough for the adapter's current game, from the state the episode is
    in (right after a reset: the whole game, cached per task)."""
    return adapter.expert_plan(from_current_state=adapter.commands_taken > 0)
