"""Fact extraction from WebShop's text pages: pure functions of the page text, the page's
clickables and the agent's own actions (testable on recorded strings).

WebShop's ``text`` observation mode joins the visible text nodes of a page with " [SEP] ";
which strings are clickable comes from the environment's available actions
(``{"has_search_bar": bool, "clickables": [...]}``). Option group names are the
non-clickable strings between "< Prev" and the product title on an item page; option
values are the clickable ones. Sub-pages (Description / Features / Reviews) look alike in
text, so which one is shown is known from the click that opened it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

SEP = " [SEP] "
MAX_ACTION_CHARS = 500
MAX_SECTION_CHARS = 2000
SECTIONS = ("description", "features", "reviews", "attributes")
BACK_TO_SEARCH, PREV, NEXT, BUY = "back to search", "< prev", "next >", "buy now"
DONE_MARK = "Thank you for shopping with us!"
# "Page 1 (Total results: 50)" (text mode) or "Page 1 (1-10) of 50 total results" (HTML template)
_TOTAL = regex.compile(r"^Page (\d{1,6}) \((?:Total results: (\d{1,9})\)|\d{1,9}-\d{1,9}\) of (\d{1,9}) total results)$")
_BACK_TO_RESULTS = "< back to results"
_PRICE = regex.compile(r"\$\s?(\d{1,9}(?:\.\d{1,2})?)")
_ASIN = regex.compile(r"^[a-z0-9]{10}$")
_T = 0.5


@dataclass(frozen=True)
class ParsedCommand:
    """``search[...]`` / ``click[...]`` split as WebShop does; anything else is ``other``."""

    kind: str  # "search" | "click" | "other"
    arg: str = ""


def parse_command(text: str) -> ParsedCommand:
    """``name[arg]`` with the argument lower-cased (WebShop lower-cases it); an empty or
    missing argument, or a name other than search/click, is ``other`` (a no-op upstream)."""
    text = (text or "").strip()
    if len(text) > MAX_ACTION_CHARS or not text.endswith("]") or "[" not in text:
        return ParsedCommand("other")
    name, _, rest = text.partition("[")
    arg = rest[:-1].strip().lower()
    name = name.strip()  # WebShop compares the name exactly: "Click[...]" is a no-op there
    if name not in ("search", "click") or not arg:
        return ParsedCommand("other")
    return ParsedCommand(name, arg)


def split_page(text: str) -> list[str]:
    return [s.strip() for s in (text or "").split("[SEP]") if s.strip()]


def parse_price(text: str) -> float | None:
    try:
        m = _PRICE.search(text or "", timeout=_T)
    except TimeoutError:
        return None
    return float(m.group(1)) if m else None


@dataclass
class PageView:
    """What one page shows, parsed from its text and clickables."""

    page: str = ""  # search | results | item | description | features | reviews | attributes | done
    results_page: int = 0
    total_results: int = 0
    listed: list[tuple[str, str, float | None]] = field(default_factory=list)  # (asin lower, title, price)
    title: str = ""
    price: float | None = None
    rating: str = ""
    options: dict[str, list[str]] = field(default_factory=dict)
    section_text: str = ""


def _after_instruction(segments: list[str]) -> list[str]:
    """Drop the "WebShop [SEP] Instruction: [SEP] <goal>" header (or "Instruction: <goal>" as
    one node) and a "Current Query: ..." line when present."""
    for i, s in enumerate(segments[:4]):
        if s == "Instruction:" or s.startswith("Instruction: "):
            rest = segments[i + (2 if s == "Instruction:" else 1):]
            return rest[1:] if rest and rest[0].startswith("Current Query:") else rest
    return segments


def parse_page(text: str, clickables: Sequence[str], has_search_bar: bool, section: str = "") -> PageView:
    """Classify and parse one text page. ``section`` names the sub-page the last click opened."""
    segments = split_page(text)
    clickable = set(clickables)
    if any(s == DONE_MARK for s in segments):
        return PageView(page="done")
    body = _after_instruction(segments)
    if has_search_bar and not clickable - {"search"}:
        return PageView(page="search")
    for i, s in enumerate(body):
        m = _TOTAL.match(s)
        if m:
            view = PageView(page="results", results_page=int(m.group(1)), total_results=int(m.group(2) or m.group(3)))
            rest = [x for x in body[i + 1:] if x.lower() not in (PREV, NEXT, BACK_TO_SEARCH)]
            j = 0
            while j < len(rest):
                if rest[j].lower() in clickable and _ASIN.match(rest[j].lower()):
                    title = rest[j + 1] if j + 1 < len(rest) else ""
                    price = parse_price(rest[j + 2]) if j + 2 < len(rest) else None
                    view.listed.append((rest[j].lower(), title, price))
                    j += 3
                else:
                    j += 1
            return view
    if BUY in clickable:
        return _parse_item(body, clickable)
    start = next((i + 1 for i, s in enumerate(body) if s.lower() in (PREV, _BACK_TO_RESULTS)), 0)
    return PageView(page=section or "description", section_text=" ".join(body[start:])[:MAX_SECTION_CHARS])


def _parse_item(body: list[str], clickable: set[str]) -> PageView:
    view = PageView(page="item")
    price_at = next((i for i, s in enumerate(body) if s.startswith("Price:")), None)
    start = next((i + 1 for i, s in enumerate(body) if s.lower() in (PREV, _BACK_TO_RESULTS)), 0)
    if price_at is None or price_at == 0:
        return view
    view.title = body[price_at - 1]
    view.price = parse_price(body[price_at])
    rating = next((s for s in body[price_at:] if s.startswith("Rating:")), "")
    view.rating = rating.partition(":")[2].strip()
    group = ""
    for s in body[start:price_at - 1]:
        if s in clickable:
            view.options.setdefault(group, []).append(s)
        else:
            group = s.lower()
    return view


@dataclass
class ObservedShop:
    """Episode bookkeeping over observable pages and the agent's own actions."""

    binding: Any = None  # WebShopBinding
    view: PageView = field(default_factory=PageView)
    query: str = ""
    product: str = ""  # asin (lower) of the open product, "" when none
    selected: dict[str, str] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    events: set[tuple[str, ...]] = field(default_factory=set)
    purchased: str = ""

    def start(self, text: str, clickables: Sequence[str], has_search_bar: bool) -> None:
        self.view = parse_page(text, clickables, has_search_bar)
        self.query, self.product, self.selected, self.purchased = "", "", {}, ""
        self.seen = {a for a, _, _ in self.view.listed}
        self.events = set()

    def observe(self, command: ParsedCommand, clickables_before: Sequence[str], text: str,
                clickables: Sequence[str], has_search_bar: bool) -> dict[str, Any]:
        """Update from one step; return the step's event facts (see ``WebShopFacts``)."""
        prev = self.view
        rejected = command.kind == "click" and (command.arg not in clickables_before or command.arg == "search")
        section = command.arg if command.kind == "click" and command.arg in SECTIONS and not rejected else ""
        if not section and prev.page in SECTIONS and not (command.kind == "click" and command.arg == PREV):
            section = prev.page  # still on the same sub-page
        view = parse_page(text, clickables, has_search_bar, section)
        selected_option = ""
        opened = False
        if command.kind == "search":
            self.query, self.selected, self.product = command.arg, {}, ""
        elif command.kind == "click" and not rejected:
            arg = command.arg
            if prev.page == "results" and _ASIN.match(arg) and view.page == "item":
                self.product, opened = arg, True
            elif prev.page == "item" and view.page == "item":
                group = next((g for g, vals in prev.options.items() if arg in vals), None)
                if group is not None:
                    self.selected[group] = arg
                    selected_option = arg
            if arg == BUY and view.page == "done":
                self.purchased = self.product
        if view.page in ("search", "results"):
            self.product, self.selected = "", {}
        if view.page == "search":
            self.query = ""
        listed = [a for a, _, _ in view.listed]
        new = [a for a in listed if a not in self.seen]
        self.seen.update(listed)
        titles = {a: t.lower() for a, t, _ in view.listed}
        event = self._event(command, rejected, view, selected_option)
        first_event = event is not None and event not in self.events
        if event is not None:
            self.events.add(event)
        self.view = view
        facts = self.state_facts()
        facts.update(
            action_kind=command.kind, action_arg=command.arg[:200], click_rejected=rejected, first_event=first_event,
            new_products=new, new_titles=[titles[a] for a in new], opened_product=opened,
            entered_item=view.page == "item" and prev.page != "item",
            selected_option=selected_option, section_text=view.section_text.lower(),
            purchased=bool(self.purchased) and view.page == "done", purchased_product=self.purchased,
            purchased_title=prev.title.lower() if self.purchased else "",
            purchased_price=prev.price if self.purchased else None,
        )
        return facts

    def _event(self, command: ParsedCommand, rejected: bool, view: PageView,
               selected_option: str) -> tuple[str, ...] | None:
        """What this step brought into view, as a key whose repeat is no new information: a
        search's keywords, a results page, a product's item page, one of its sub-pages, an option
        value chosen for it, a purchase. None for a step that brought nothing (rejected, no-op)."""
        if command.kind == "other" or rejected:
            return None
        if view.page == "done":
            return ("buy", self.purchased)
        if view.page == "search":
            return ("search_page",)
        if view.page == "results":
            return ("results", self.query, str(view.results_page))
        if selected_option:
            group = next((g for g, value in self.selected.items() if value == selected_option), "")
            return ("select", self.product, group, selected_option)
        return (view.page, self.product)

    def state_facts(self) -> dict[str, Any]:
        """Standing facts of the current page (also used for steps the engine never saw)."""
        v = self.view
        return dict(
            page=v.page, query=self.query, results_page=v.results_page, total_results=v.total_results,
            listed_products=[a for a, _, _ in v.listed], listed_titles=[t.lower() for _, t, _ in v.listed],
            product=self.product if v.page not in ("search", "results", "done") else "",
            product_title=v.title.lower(), product_price=v.price,
            option_groups=sorted(v.options), option_values=sorted({x for vals in v.options.values() for x in vals}),
            selected_options=dict(self.selected), stage=self.stage(),
        )

    def stage(self) -> str:
        """search | results | product | options_done | bought, relative to the binding."""
        page = self.view.page
        if page == "done":
            return "bought"
        if page in ("search", "results"):
            return page
        wanted: Mapping[str, str] = getattr(self.binding, "options", {}) or {}
        if wanted and all(self.selected.get(k) == v for k, v in wanted.items()):
            return "options_done"
        return "product"

    def signature(self) -> str:
        v = self.view
        return json.dumps([v.page, self.query, v.results_page, self.product, sorted(self.selected.items()),
                           v.title], separators=(",", ":"))

    def context_key(self) -> str:
        """Page type, product, selected options and stage (WebShop's TRCA context groups)."""
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.selected.items()))
        return f"{self.view.page}|{self.product}|{opts}|{self.stage()}"

    def entities(self) -> list[str]:
        return [a for a, _, _ in self.view.listed] + ([self.product] if self.product else [])
