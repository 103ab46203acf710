"""What a SearchQA step shows and what it reveals: every fact is built here.

Pure functions of text (rendering of results, pages and passages, the ``verb[arg]`` command
syntax, the mention checks) and one tracker, ``ObservedSearch``, that remembers what the
agent searched and was shown this episode and turns each step's passages into its
observation, ``SearchQAFacts`` dict, entities, state signature and context key. No
retriever and no gold answers: testable on recorded strings."""

from __future__ import annotations

import hashlib
import string
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from rubricgym.adapters.searchqa.answers import answer_kind, contains_phrase, normalize_answer, normalize_query, value_kinds
from rubricgym.adapters.searchqa.data import Passage

SNIPPET_WORDS = 12
TRCA_VERBS = ("search", "open", "read", "answer")
MAX_ARG_CHARS = 300
MAX_ANSWER_CHARS = 200

SEARCH_R1_INSTRUCTION = (
    "Answer the given question. Reason inside <think> and </think> whenever you get new information. "
    "If you lack knowledge, call the search engine with <search> query </search>; it returns the top "
    "results between <information> and </information>. You can search as many times as you want. When "
    "no further knowledge is needed, give the answer inside <answer> and </answer> without explanation, "
    "for example <answer> Beijing </answer>."
)
SEARCH_R1_INVALID = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)
TRCA_INSTRUCTION = (
    "Answer the question by searching a document collection. Reply with <think>...</think> and then one "
    "<action>...</action> holding one of: search[query] (list matching documents), open[i] (open result i "
    "of the last search), read[j] (read passage j of the open document), answer[text] (final answer)."
)


def render_information(passages: Sequence[Passage]) -> str:
    """Search-R1's rendering: ``Doc i(Title: <title>) <text>`` lines inside <information>."""
    if not passages:
        return "\n\n<information>No results.</information>\n\n"
    lines = [f"Doc {i}(Title: {p.title}) {p.text}" for i, p in enumerate(passages, 1)]
    return "\n\n<information>" + "\n".join(lines) + "</information>\n\n"


def snippet(text: str, words: int = SNIPPET_WORDS) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def render_results(query: str, passages: Sequence[Passage]) -> str:
    if not passages:
        return f"No results for '{query}'."
    lines = [f"[{i}] {p.title}: {snippet(p.text)}" for i, p in enumerate(passages, 1)]
    return f"Results for '{query}':\n" + "\n".join(lines)


def render_document(title: str, passages: Sequence[Passage]) -> str:
    lines = [f"[{j}] {snippet(p.text)}" for j, p in enumerate(passages, 1)]
    return f"Document: {title} ({len(passages)} passages)\n" + "\n".join(lines)


def render_passage(title: str, j: int, passage: Passage) -> str:
    return f"Document: {title}, passage [{j}]\n{passage.text}"


def admissible_listing(num_results: int, num_passages: int) -> list[str]:
    """The command forms valid on the current page (free-text arguments as placeholders)."""
    actions = ["search[<query>]"]
    actions += [f"open[{i}]" for i in range(1, num_results + 1)]
    actions += [f"read[{j}]" for j in range(1, num_passages + 1)]
    return actions + ["answer[<text>]"]


def parse_command(text: str) -> tuple[str, str] | None:
    """``verb[arg]`` -> (verb, arg) for the four verbs; None when the text has another shape.
    One pass over the string, no patterns."""
    text = text.strip()
    head, sep, rest = text.partition("[")
    verb = head.strip().lower()
    if not sep or verb not in TRCA_VERBS or not rest.endswith("]"):
        return None
    arg = rest[:-1].strip()
    if not arg or len(arg) > MAX_ARG_CHARS or "[" in arg or "]" in arg:
        return None
    if verb in ("open", "read") and not (arg.isascii() and arg.isdigit() and len(arg) <= 6):  # ASCII: int() takes it
        return None
    return verb, arg


def has_markup(text: str) -> bool:
    """A query or answer that carries tags (``<answer>`` inside ``<search>``) is malformed."""
    return "<" in text and ">" in text


def mentioned(text: str, targets: Iterable[str]) -> list[str]:
    """The targets that occur, as whole normalized words, in ``text``."""
    norm = f" {normalize_answer(text)} "
    return [t for t in targets if normalize_answer(t) and f" {normalize_answer(t)} " in norm]


def title_matches(titles: Iterable[str], targets: Iterable[str]) -> list[str]:
    """Targets that are (normalized) equal to one of the titles."""
    norm = {normalize_answer(t) for t in titles}
    return [t for t in targets if normalize_answer(t) and normalize_answer(t) in norm]


def name_words(text: str) -> set[str]:
    """Lower-cased words written with a capital (names, titles) in a shown text."""
    out = set()
    for raw in text.split():
        word = raw.strip(string.punctuation + "“”‘’")
        if len(word) >= 3 and word[0].isupper():
            out.add(word.lower())
    return out


def discovered_in_query(query: str, earlier_names: set[str], question: str) -> bool:
    """The query uses a name the agent saw in earlier results and the question does not
    contain: it follows a lead (the bridge entity of a two-hop question)."""
    question_words = set(normalize_answer(question).split())
    return any(w in earlier_names and w not in question_words for w in normalize_answer(query).split())


class Shown(NamedTuple):
    """One step as the agent sees it: the observation, its facts, the entities it names, and
    the state signature and context key after it."""

    observation: str
    facts: dict[str, Any]
    entities: list[str]
    state_signature: str
    context_key: str


class ObservedSearch:
    """The episode's memory of what the agent did and saw, and the facts built from it.

    The adapter reports each step's engine result (the passages shown, or a refusal);
    the matching method updates the memory and returns the step's ``Shown``.
    """

    def __init__(self, grammar: str, max_turns: int):
        self.grammar, self.max_turns = grammar, max_turns
        self.start("", [])

    def start(self, question: str, targets: Sequence[str]) -> None:
        """Forget the last episode; ``targets`` are the binding's target entities."""
        self.question, self.targets = question, list(targets)
        self.turn = 0
        self.queries: list[str] = []
        self.listed_ids: set[str] = set()
        self.read_ids: set[str] = set()
        self.shown_norm: list[str] = []        # normalized text of everything shown, for answer grounding
        self.names_seen: set[str] = set()      # capitalised words shown, for discovered entities
        self.seen_targets: list[str] = []
        self.page = "start"
        self.page_ids: list[str] = []
        self.document_title = ""               # the open document's, "" when none is open
        self.answer: str | None = None

    def take_turn(self) -> None:
        self.turn += 1

    # -- what the episode stands at --------------------------------------------------
    def standing(self) -> dict[str, Any]:
        """The facts every step carries (alone: at reset and for an unparseable response)."""
        return {"grammar": self.grammar, "searches": len(self.queries), "seen_targets": list(self.seen_targets),
                "turns_left": max(0, self.max_turns - self.turn)}

    def signature(self) -> str:
        raw = f"{self.page}|{','.join(self.page_ids)}|{self.document_title}|{self.answer is not None}"
        return hashlib.sha1(raw.encode()).hexdigest()[:16]

    def context_key(self, tool: str) -> str:
        evidence = "none" if not self.seen_targets else ("all" if len(self.seen_targets) >= len(self.targets) else "some")
        return (f"tool={tool or 'none'}|searches={min(len(self.queries), 2)}|page={self.page}"
                f"|evidence={evidence}|answered={self.answer is not None}")

    # -- steps -----------------------------------------------------------------------
    def searched(self, query: str, passages: Sequence[Passage]) -> Shown:
        """A search returned ``passages``: Search-R1 shows them in full, trca lists them."""
        names_before = set(self.names_seen)
        norm = normalize_query(query)
        repeated = norm in self.queries
        self.queries.append(norm)
        self.document_title = ""
        self.page, self.page_ids = "results", [p.id for p in passages]
        if self.grammar == "search-r1":
            observation = render_information(passages)
            shown = " ".join(f"{p.title} {p.text}" for p in passages)
        else:
            observation = render_results(query, passages)
            shown = observation
        facts = self._show(shown, passages, full=self.grammar == "search-r1")
        facts.update(query=norm, query_repeated=repeated, action_allowed=True,
                     query_targets=mentioned(query, self.targets),
                     query_uses_discovered_entity=discovered_in_query(query, names_before, self.question),
                     searches=len(self.queries))
        return self._step(observation, "search", facts, facts["result_titles"])

    def opened(self, title: str, passages: Sequence[Passage]) -> Shown:
        """A result's document was opened: its passages are listed as snippets."""
        self.document_title = title
        self.page, self.page_ids = "document", [p.id for p in passages]
        observation = render_document(title, passages)
        facts = self._show(observation, passages, full=False)
        facts.update(opened_title=title, action_allowed=True)
        return self._step(observation, "open", facts, [title] if title else [])

    def read(self, title: str, index: int, passage: Passage) -> Shown:
        """Passage ``index`` (1-based) of the open document ``title`` was shown in full."""
        self.page, self.page_ids = "passage", [passage.id]
        observation = render_passage(title, index, passage)
        facts = self._show(f"{title} {passage.text}", [passage], full=True)
        facts.update(action_allowed=True)
        return self._step(observation, "read", facts, [title] if title else [])

    def answered(self, text: str) -> Shown:
        """The episode's answer, cut to ``MAX_ANSWER_CHARS`` (the cut text is what gets scored)."""
        answer = text[:MAX_ANSWER_CHARS]
        grounded = any(contains_phrase(shown, answer) for shown in self.shown_norm)
        self.answer = answer
        self.page, self.page_ids = "answered", []
        facts = {"answer": answer, "answer_words": len(normalize_answer(answer).split()), "answer_kind": answer_kind(answer),
                 "answer_in_evidence": grounded, "action_allowed": True}
        return self._step(f"Answer submitted: {answer}", "answer", facts, [])

    def refused(self, tool: str, message: str, malformed: bool) -> Shown:
        """Nothing executed; Search-R1 shows its fixed invalid-action message instead of ``message``."""
        shown = SEARCH_R1_INVALID if self.grammar == "search-r1" else message
        return self._step(shown, "" if malformed else tool, {"malformed": malformed}, [])

    def _step(self, observation: str, tool: str, facts: dict[str, Any], entities: list[str]) -> Shown:
        return Shown(observation, {**self.standing(), "tool": tool, **facts}, entities, self.signature(),
                     self.context_key(tool))

    def _show(self, shown_text: str, passages: Sequence[Passage], full: bool) -> dict[str, Any]:
        """Remember what the agent was shown; the facts about it."""
        ids = [p.id for p in passages]
        new_ids = [i for i in ids if i not in self.listed_ids and i not in self.read_ids]
        new_full = [p.id for p in passages if full and p.id not in self.read_ids]
        self.listed_ids.update(ids)
        if full:
            self.read_ids.update(ids)
        mentions = mentioned(shown_text, self.targets)
        self.seen_targets = [t for t in self.targets if t in self.seen_targets or t in mentions]
        self.shown_norm.append(normalize_answer(shown_text))
        self.names_seen |= name_words(shown_text)
        titles = list(dict.fromkeys(p.title for p in passages if p.title))
        return {"result_ids": ids, "new_result_ids": new_ids, "num_results": len(ids), "new_passage_ids": new_full,
                "result_titles": titles, "mentioned_targets": mentions,
                "target_titles": title_matches(titles, self.targets), "revealed_value_kinds": value_kinds(shown_text)}
