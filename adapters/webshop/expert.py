"""WebShop's expert player (``spec.expert``): an oracle that knows the goal product.

It reads privileged state (the goal record, the shop's search index), so it serves the
expert warm start and evaluation only, never an agent's observation.
"""

from __future__ import annotations

from collections.abc import Sequence

from rubricgym.adapters.webshop.adapter import WebShopAdapter
from rubricgym.adapters.webshop.catalogue import Goal
from rubricgym.adapters.webshop.search import PRODUCT_WINDOW


def expert_actions(adapter: WebShopAdapter) -> list[str]:
    """The spec's expert: an oracle that knows the goal product (search with the instruction,
    open the target, read its features, select the goal options, buy)."""
    goal = adapter.goal()
    if isinstance(goal, Goal):
        hits = adapter.shop.index.search(goal.instruction_text)
        return oracle_actions(goal, hits)
    # WebShop's own goals: search with the instruction and open the target when it is listed
    target = str(goal.get("asin", "")).lower()
    options = goal.get("goal_options") or {}
    values = list(options.values()) if isinstance(options, dict) else list(options)
    return [f"search[{adapter.shop.instruction}]", f"click[{target}]",
            *[f"click[{v}]" for v in values], "click[buy now]"]


def oracle_actions(goal: Goal, search_hits: Sequence[str]) -> list[str]:
    """Search with the instruction, page to the target, open it, read its features, go
    back, select the goal options, buy (``search_hits``: the hits of that search)."""
    actions = [f"search[{goal.instruction_text}]"]
    position = list(search_hits).index(goal.asin)
    actions += ["click[next >]"] * (position // PRODUCT_WINDOW)
    actions += [f"click[{goal.asin.lower()}]", "click[features]", "click[< prev]"]
    actions += [f"click[{value}]" for value in goal.goal_options.values()]
    return actions + ["click[buy now]"]
