"""The bundled WebShop-protocol engine: WebShop's page flow and text observations over a
catalogue written for this project (NOT the official WebShop data).

Pages: search -> results (top 50 BM25 hits, 10 per page, "< Prev" from page 2, "Next >")
-> item (option groups, title, price, rating, Description / Features / Reviews, Buy Now)
-> done. "Back to Search" starts over; "< Prev" goes back one level (a sub-page to its item,
an item to its results page, a results page to the previous page). ``search[...]`` works
from any page, ``click[...]`` only on a clickable of the current page (lower-cased), and
anything else leaves the page as it is with reward 0, as in WebShop's text environment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rubricgym.adapters.webshop.catalogue import Catalogue, Goal, Product
from rubricgym.adapters.webshop.observe import BACK_TO_SEARCH, BUY, DONE_MARK, NEXT, PREV, SEP, parse_command
from rubricgym.adapters.webshop.reward import RewardBreakdown, purchase_reward
from rubricgym.adapters.webshop.search import PRODUCT_WINDOW, ProductIndex, page_of

SUB_PAGES = ("description", "features", "reviews")


@dataclass
class _Session:
    goal: Goal
    page: str = "search"
    keywords: str = ""
    hits: list[str] = field(default_factory=list)
    page_no: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    done: bool = False
    reward: float = 0.0
    breakdown: RewardBreakdown | None = None


class BundledShop:
    """One shopping session at a time over a ``Catalogue`` (the goals of one split)."""

    def __init__(self, catalogue: Catalogue, split: str | None = None, index: ProductIndex | None = None):
        self.catalogue = catalogue
        self.products: dict[str, Product] = catalogue.by_asin()
        self.goals: dict[str, Goal] = {g.goal_id: g for g in catalogue.goals if split is None or g.split == split}
        self.index = index or ProductIndex(catalogue.products)
        self._s: _Session | None = None

    # -- session ------------------------------------------------------------------------
    def reset(self, goal_id: str) -> str:
        self._s = _Session(goal=self.goals[goal_id])
        return self.render()

    @property
    def session(self) -> _Session:
        if self._s is None:
            raise RuntimeError("reset the shop first")
        return self._s

    @property
    def instruction(self) -> str:
        return self.session.goal.instruction_text

    def available_actions(self) -> dict[str, Any]:
        """WebShop's ``{"has_search_bar", "clickables"}`` for the current page."""
        s = self.session
        if s.page == "search":
            return {"has_search_bar": True, "clickables": ["search"]}
        if s.page == "results":
            clicks = [BACK_TO_SEARCH] + ([PREV] if s.page_no > 1 else [])
            clicks += [NEXT] if s.page_no * PRODUCT_WINDOW < len(s.hits) else []
            return {"has_search_bar": False, "clickables": clicks + [a.lower() for a in page_of(s.hits, s.page_no)]}
        if s.page == "item":
            product = self.products[s.asin or ""]
            values = [v for vals in product.options.values() for v in vals]
            return {"has_search_bar": False, "clickables": [BACK_TO_SEARCH, PREV, *values, *SUB_PAGES, BUY]}
        if s.page in SUB_PAGES:
            return {"has_search_bar": False, "clickables": [BACK_TO_SEARCH, PREV]}
        return {"has_search_bar": False, "clickables": []}

    def step(self, action: str) -> tuple[str, float, bool]:
        """One WebShop action; returns ``(observation, reward, done)``."""
        s = self.session
        if s.done:
            return self.render(), 0.0, True
        command = parse_command(action)
        clickables = self.available_actions()["clickables"]
        if command.kind == "search":
            self._search(command.arg, 1)
        elif command.kind == "click" and command.arg in clickables and command.arg != "search":
            self._click(command.arg)
        return self.render(), (s.reward if s.done else 0.0), s.done

    def _search(self, keywords: str, page_no: int) -> None:
        s = self.session
        if page_no == 1 or keywords != s.keywords:
            s.hits = self.index.search(keywords)
        s.keywords, s.page_no, s.page, s.asin, s.options = keywords, page_no, "results", None, {}

    def _click(self, arg: str) -> None:
        s = self.session
        if arg == BACK_TO_SEARCH:
            s.page, s.keywords, s.hits, s.page_no, s.asin, s.options = "search", "", [], 1, None, {}
        elif arg == NEXT and s.page == "results":
            s.page_no += 1
        elif arg == PREV and s.page == "results":
            s.page_no -= 1
        elif arg == PREV and s.page == "item":
            s.page, s.asin, s.options = "results", None, {}
        elif arg == PREV and s.page in SUB_PAGES:
            s.page = "item"
        elif s.page == "results":
            s.asin, s.page = arg.upper(), "item"
        elif s.page == "item" and arg == BUY:
            product = self.products[s.asin or ""]
            s.breakdown = purchase_reward(product, s.goal, product.price, s.options)
            s.reward, s.done, s.page = s.breakdown.reward, True, "done"
        elif s.page == "item" and arg in SUB_PAGES:
            s.page = arg
        elif s.page == "item":
            product = self.products[s.asin or ""]
            group = next(g for g, vals in product.options.items() if arg in vals)
            s.options[group] = arg

    # -- rendering (WebShop's "text" observation mode) ------------------------------------
    def render(self) -> str:
        s = self.session
        head = ["WebShop", "Instruction:", s.goal.instruction_text]
        if s.page == "search":
            return SEP.join(head + ["Search"])
        if s.page == "results":
            parts = head + ["Back to Search", f"Page {s.page_no} (Total results: {len(s.hits)})"]
            parts += ["< Prev"] if s.page_no > 1 else []
            parts += ["Next >"] if s.page_no * PRODUCT_WINDOW < len(s.hits) else []
            for asin in page_of(s.hits, s.page_no):
                p = self.products[asin]
                parts += [asin, p.title, p.price_tag]
            return SEP.join(parts)
        if s.page == "done":
            return SEP.join([DONE_MARK, "Your code:", "None", "(Paste it in your MTurk interface.)", "Purchased",
                             "asin", s.asin or "", "options", json.dumps(s.options),
                             "Your score (min 0.0, max 1.0)", f"{s.reward}"])
        p = self.products[s.asin or ""]
        parts = head + ["Back to Search", "< Prev"]
        if s.page == "item":
            for group, values in p.options.items():
                parts += [group, *values]
            parts += [p.title, f"Price: {p.price_tag}", f"Rating: {p.rating}", "Description", "Features",
                      "Reviews", "Buy Now"]
        elif s.page == "description":
            parts += [p.description]
        elif s.page == "features":
            parts += p.bullet_points
        else:
            for r in p.reviews:
                parts += [r.title, str(r.score), r.body]
        return SEP.join(parts)

    # -- privileged (expert player and evaluation only) ------------------------------------
    @property
    def goal(self) -> Goal:
        return self.session.goal

    def product(self, asin: str) -> Product | None:
        return self.products.get(asin.upper())

    def purchased(self) -> tuple[str | None, dict[str, str], RewardBreakdown | None]:
        s = self.session
        return (s.asin if s.done else None), dict(s.options), s.breakdown

