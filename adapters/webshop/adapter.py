"""``WebShopAdapter``: the WebShop text protocol behind rubricgym's adapter contract.

``engine="bundled"`` plays the WebShop-protocol engine over the catalogue bundled with
rubricgym (NOT the official data); ``engine="real"`` wraps WebShop's own text environment
when its site package is installed and fails with a clear message otherwise. Facts come
from ``ObservedShop`` (page text, clickables, the agent's actions); the engine's purchase
reward only sets the step reward and the outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, ClassVar

from rubricgym import Adapter, EngineFailure, EngineReset, EngineState, EngineStep, Outcome, ParsedAction
from rubricgym.adapters.webshop.binder import bind_task
from rubricgym.adapters.webshop.catalogue import BUNDLED_LABEL, Goal, bundled_catalogue
from rubricgym.adapters.webshop.engine import BundledShop
from rubricgym.adapters.webshop.facts import WebShopBinding, WebShopFacts
from rubricgym.adapters.webshop.observe import ObservedShop, ParsedCommand, parse_command
from rubricgym.adapters.webshop.search import ProductIndex

SEARCH_HINT = "search[<keywords>]"


@lru_cache(maxsize=1)
def _bundled_index() -> ProductIndex:
    return ProductIndex(bundled_catalogue().products)


def admissible_actions(available: dict[str, Any]) -> list[str]:
    """WebShop's available actions that can be sent as they are: one ``click[...]`` per
    clickable (the no-op Search button excluded). A search bar is an action *template*
    (``info["action_templates"]``): an agent fills in its own keywords."""
    return [f"click[{c}]" for c in available.get("clickables", []) if c != "search"]


def action_info(available: dict[str, Any]) -> dict[str, Any]:
    """What every state adds to ``info``: the engine's available actions and the templates."""
    return {"available_actions": dict(available),
            "action_templates": [SEARCH_HINT] if available.get("has_search_bar") else []}


class WebShopAdapter(Adapter):
    """One WebShop session at a time; ``split`` "train" or "eval"."""

    benchmark: ClassVar[str] = "WebShop"
    facts_model: ClassVar[type[WebShopFacts]] = WebShopFacts
    binding_model: ClassVar[type[WebShopBinding]] = WebShopBinding

    def __init__(self, split: str = "train", engine: str = "bundled", **engine_kwargs: Any):
        self.split, self.engine_kind = split, engine
        if engine == "bundled":
            if engine_kwargs:
                raise TypeError(f"the bundled WebShop engine takes no options {sorted(engine_kwargs)}")
            self.shop: Any = BundledShop(bundled_catalogue(), split=split, index=_bundled_index())
            self._task_ids = list(self.shop.goals)
            self.source = BUNDLED_LABEL
        elif engine == "real":
            from rubricgym.adapters.webshop.real import RealShop  # lazy: only WebShop's own engine needs it

            self.shop = RealShop(split=split, **engine_kwargs)
            self._task_ids = list(self.shop.goal_ids)
            self.source = "WebShop's own text environment (web_agent_site)"
        else:
            raise ValueError(f"engine must be 'bundled' or 'real', got {engine!r}")
        self._task_id: str | None = None
        self._binding = WebShopBinding()
        self._world = ObservedShop()
        self._available: dict[str, Any] = {"has_search_bar": False, "clickables": []}
        self._reward = 0.0
        self._done = False

    # -- contract -----------------------------------------------------------------------
    def task_ids(self) -> Sequence[str]:
        return list(self._task_ids)

    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        if task_id not in self._task_ids:
            raise KeyError(f"unknown WebShop task {task_id!r}")
        try:
            text = self.shop.reset(task_id)
            self._available = self.shop.available_actions()
            instruction = self.shop.instruction
        except Exception as exc:
            raise EngineFailure(f"could not start {task_id}: {type(exc).__name__}: {exc}") from exc
        self._task_id, self._reward, self._done = task_id, 0.0, False
        self._binding = bind_task(instruction)
        self._world = ObservedShop(binding=self._binding)
        self._world.start(text, self._available["clickables"], self._available["has_search_bar"])
        return EngineReset(
            observation=text, instruction=instruction, state_signature=self._world.signature(),
            admissible_actions=admissible_actions(self._available), entities=self._world.entities(),
            context_key=self._world.context_key(), benchmark_facts=self._world.state_facts(),
            info={"source": self.source, **action_info(self._available)},
        )

    def step(self, action: ParsedAction) -> EngineStep:
        if self._task_id is None:
            raise EngineFailure("WebShop engine is not running; reset first")
        text_action = action.action or ""
        command = parse_command(text_action)
        before = list(self._available["clickables"])
        try:
            text, reward, done = self.shop.step(text_action)
            self._available = self.shop.available_actions() if not done else {"has_search_bar": False, "clickables": []}
        except Exception as exc:
            raise EngineFailure(f"{type(exc).__name__}: {exc}") from exc
        facts = self._world.observe(command, before, text, self._available["clickables"],
                                    self._available["has_search_bar"])
        self._reward, self._done = float(reward), bool(done)
        refused = command.kind == "other" or facts["click_rejected"]
        return EngineStep(
            observation=text, state_signature=self._world.signature(),
            admissible_actions=admissible_actions(self._available), entities=self._world.entities(),
            context_key=self._world.context_key(), benchmark_facts=facts, reward=self._reward,
            terminated=self._done, accepted=not refused, error_text=_refusal(command) if refused else "",
            info=action_info(self._available),
        )

    def is_admissible(self, action: str, state: EngineState) -> bool | None:
        """Searches are admissible where the page has a search bar, clicks on a clickable."""
        command = parse_command(action)
        if command.kind == "search":
            return bool(state.info.get("available_actions", {}).get("has_search_bar"))
        if command.kind == "click":
            return f"click[{command.arg}]" in (state.admissible_actions or [])
        return False

    def invalid_step(self, action: ParsedAction, state: EngineState) -> EngineStep:
        """An unparseable response: the shop is not called; the page's standing facts stay."""
        step = super().invalid_step(action, state)
        return step.model_copy(update={"benchmark_facts": self._world.state_facts(),
                                       "info": action_info(self._available)})

    def binding(self) -> WebShopBinding:
        return self._binding

    def outcome(self) -> Outcome:
        asin, options, breakdown = self.shop.purchased()
        detail: dict[str, Any] = {"task_id": self._task_id, "source": self.source, "purchased": asin,
                                  "options": options}
        if breakdown is not None:
            detail["reward_breakdown"] = breakdown.model_dump() if hasattr(breakdown, "model_dump") else breakdown
        return Outcome(success=self._done and self._reward == 1.0, score=self._reward, detail=detail)

    def render_state(self) -> str:
        return self._world.signature()

    def close(self) -> None:
        self._task_id = None

    # -- extras -------------------------------------------------------------------------
    def goal(self) -> Goal | dict[str, Any]:
        """The current goal record (privileged: the expert player and evaluation only)."""
        return self.shop.goal


def _refusal(command: ParsedCommand) -> str:
    if command.kind == "other":
        return "not an action: use search[keywords] or click[text of a clickable on the page] (nothing happened)"
    return f"click[{command.arg}]: no such clickable on this page (nothing happened)"
