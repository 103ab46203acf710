"""What a SearchQA step shows and what it reveals, as pure functions of text: rendering of
results, pages and passages, the ``verb[arg]`` command syntax, and the mention checks the
facts are built from. No retriever, no episode state: testable on recorded strings."""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence

from rubricgym.adapters.searchqa.answers import normalize_answer
from rubricgym.adapters.searchqa.data import Passage

SNIPPET_WORDS = 12
TRCA_VERBS = ("search", "open", "read", "answer")
MAX_ARG_CHARS = 300

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
    if verb in ("open", "read") and not arg.isdigit():
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
