"""``SearchQAAdapter``: search-augmented question answering behind rubricgym's adapter contract.

One engine, two action grammars:

* ``"search-r1"`` (default): ``<search>q</search>`` returns the top-k passages inside
  ``<information>``; ``<answer>a</answer>`` ends the episode. The first block decides.
* ``"trca"``: ``<action>search[q]</action>`` lists results (title + snippet), ``open[i]``
  opens result i's document (numbered passages), ``read[j]`` shows passage j in full,
  ``answer[text]`` ends the episode; every observation lists the admissible commands.

The terminal reward is exact match against the gold aliases; gold answers are read only
there. Facts come from the action and the text the retriever returned, built by
``observe.ObservedSearch``; this module drives the retriever and the episode.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from rubricgym import (
    ACTION_GRAMMAR,
    Adapter,
    EngineFailure,
    EngineReset,
    EngineState,
    EngineStep,
    Outcome,
    ParsedAction,
    TagGrammar,
)
from rubricgym.adapters.searchqa import observe
from rubricgym.adapters.searchqa.answers import exact_match, normalize_query
from rubricgym.adapters.searchqa.binder import bind_task
from rubricgym.adapters.searchqa.data import BUNDLED_CORPUS, BUNDLED_QUESTIONS, Passage, Question, load_questions
from rubricgym.adapters.searchqa.engine import MAX_QUERY_CHARS, Hit, Retriever, bm25_for_file
from rubricgym.adapters.searchqa.facts import SearchQABinding, SearchQAFacts

SEARCH_R1_GRAMMAR = TagGrammar(action_tags=("search", "answer"), reasoning_tag="think", on_multiple="first")
GRAMMARS = {"search-r1": SEARCH_R1_GRAMMAR, "trca": ACTION_GRAMMAR}


class SearchQAAdapter(Adapter):
    """One question at a time over a retriever.

    ``split`` picks the bundled train/eval questions; ``questions`` (JSON lines or Parquet)
    and ``corpus`` (JSON lines) replace them with a user's files; ``server_url`` uses a
    Search-R1 style retrieval server instead of the local bm25s index.
    """

    benchmark: ClassVar[str] = "SearchQA"
    facts_model: ClassVar[type[SearchQAFacts]] = SearchQAFacts
    binding_model: ClassVar[type[SearchQABinding]] = SearchQABinding

    def __init__(self, split: str = "train", corpus: str | os.PathLike[str] | None = None,
                 questions: str | os.PathLike[str] | None = None, grammar: str = "search-r1", topk: int = 3,
                 max_turns: int = 10, server_url: str | None = None, server_timeout: float = 10.0,
                 server_attempts: int = 3, retriever: Retriever | None = None):
        if grammar not in GRAMMARS:
            raise ValueError(f"grammar must be one of {sorted(GRAMMARS)}, got {grammar!r}")
        if questions is None and split not in BUNDLED_QUESTIONS:
            raise ValueError(f"split must be one of {sorted(BUNDLED_QUESTIONS)}, got {split!r}")
        if not 1 <= topk <= 50 or max_turns < 1:
            raise ValueError("topk must be in 1..50 and max_turns >= 1")
        self.grammar_name = grammar
        self.grammar = GRAMMARS[grammar]
        self.topk, self.max_turns = topk, max_turns
        self._questions = {q.id: q for q in load_questions(questions or BUNDLED_QUESTIONS[split])}
        if retriever is not None:
            self.retriever: Retriever = retriever
        elif server_url:
            from rubricgym.adapters.searchqa.http_client import HTTPRetriever  # lazy: only with a server

            self.retriever = HTTPRetriever(server_url, timeout=server_timeout, attempts=server_attempts)
        else:
            self.retriever = bm25_for_file(corpus or BUNDLED_CORPUS)
        self._q: Question | None = None
        self._binding = SearchQABinding()
        self.observed = observe.ObservedSearch(grammar, max_turns)
        self._new_episode()

    # -- episode state ------------------------------------------------------------------
    def _new_episode(self) -> None:
        self.observed.start(self._q.question if self._q else "", self._binding.target_entities)
        self.results: list[Passage] = []       # the last search's results
        self.document: tuple[str, list[Passage]] | None = None
        self.score = 0.0

    def _admissible(self) -> list[str]:
        n_doc = len(self.document[1]) if self.document else 0
        return observe.admissible_listing(len(self.results), n_doc)

    def _with_listing(self, text: str) -> str:
        if self.grammar_name != "trca":
            return text
        return f"{text}\nAdmissible actions: {', '.join(self._admissible())}"

    # -- contract -----------------------------------------------------------------------
    def task_ids(self) -> Sequence[str]:
        return list(self._questions)

    def question(self) -> Question:
        if self._q is None:
            raise RuntimeError("reset() the SearchQA adapter first")
        return self._q

    def reset(self, task_id: str, seed: int | None) -> EngineReset:
        if task_id not in self._questions:
            raise KeyError(f"unknown SearchQA question {task_id!r}")
        self._q = self._questions[task_id]
        self._binding = bind_task(self._q.question)
        self._new_episode()
        intro = observe.SEARCH_R1_INSTRUCTION if self.grammar_name == "search-r1" else observe.TRCA_INSTRUCTION
        observation = self._with_listing(f"{intro}\nQuestion: {self._q.question}")
        return EngineReset(
            observation=observation, instruction=self._q.question, state_signature=self.observed.signature(),
            context_key=self.observed.context_key(""), benchmark_facts=self.observed.standing(),
            info={"question_id": self._q.id, "data_source": self._q.data_source, "grammar": self.grammar_name},
        )

    def step(self, action: ParsedAction) -> EngineStep:
        q = self.question()
        if self.observed.answer is not None:
            raise EngineFailure("the episode already ended with an answer; reset first")
        self.observed.take_turn()
        text = action.action or ""
        if self.grammar_name == "search-r1":
            tool, arg = action.kind or "", text
            malformed = has_problem(arg)
        else:
            parsed = observe.parse_command(text)
            tool, arg = parsed if parsed else ("", text)
            malformed = parsed is None or has_problem(arg)
        if malformed:
            return self._rejected(tool, f"Malformed action {text[:80]!r}: expected "
                                  + ("<search>query</search> or <answer>text</answer>" if self.grammar_name == "search-r1"
                                     else "search[query], open[i], read[j] or answer[text]"), malformed=True)
        if tool == "answer":
            return self._answer(arg, q)
        if tool == "search":
            return self._search(arg)
        return self._open_or_read(tool, int(arg))

    def invalid_step(self, action: ParsedAction, state: EngineState) -> EngineStep:
        """An unparseable response uses a turn; Search-R1 answers with its fixed message."""
        self.observed.take_turn()
        step = super().invalid_step(action, state)
        update: dict[str, Any] = {"benchmark_facts": self.observed.standing()}
        if self.grammar_name == "search-r1":
            update["observation"] = observe.SEARCH_R1_INVALID
        else:
            update["observation"] = self._with_listing(step.observation)
        update.update(self._budget())
        return step.model_copy(update=update)

    def binding(self) -> SearchQABinding:
        return self._binding

    def outcome(self) -> Outcome:
        q = self._q
        return Outcome(success=self.score == 1.0, score=self.score,
                       detail={"question_id": q.id if q else None, "answer": self.observed.answer,
                               "turns": self.observed.turn})

    def render_state(self) -> str:
        return f"{self.observed.page} {self.observed.page_ids} turn {self.observed.turn}/{self.max_turns}"

    def close(self) -> None:
        self.retriever.close()

    # -- steps --------------------------------------------------------------------------
    def _budget(self) -> dict[str, Any]:
        """Truncate when the turn budget is spent without an answer."""
        return {"truncated": True} if self.observed.turn >= self.max_turns and self.observed.answer is None else {}

    def _state(self, shown: observe.Shown, **kw: Any) -> EngineStep:
        step = EngineStep(observation=self._with_listing(shown.observation), state_signature=shown.state_signature,
                          entities=shown.entities, context_key=shown.context_key, benchmark_facts=shown.facts, **kw)
        return step.model_copy(update=self._budget())

    def _rejected(self, tool: str, message: str, malformed: bool = False) -> EngineStep:
        """Nothing executed: the state stays, the step is refused (action_allowed stays false);
        the detail stays in error_text."""
        return self._state(self.observed.refused(tool, message, malformed), accepted=False, error_text=message)

    def _search(self, query: str) -> EngineStep:
        try:
            hits: list[Hit] = self.retriever.search(query, self.topk)
        except Exception as exc:  # the retriever is the engine: its failure is never the policy's
            raise EngineFailure(f"retrieval failed: {exc}") from exc
        self.results, self.document = [h.passage for h in hits], None
        return self._state(self.observed.searched(query, self.results))

    def _open_or_read(self, tool: str, index: int) -> EngineStep:
        if tool == "open":
            if not 1 <= index <= len(self.results):
                return self._rejected(tool, f"open[{index}]: there is no result {index}"
                                      + (" (search first)" if not self.results else f" (results 1..{len(self.results)})"))
            hit = self.results[index - 1]
            passages = self.retriever.document(hit.title) if hit.title else []
            if not passages:
                passages = [hit]
            self.document = (hit.title, passages)
            return self._state(self.observed.opened(hit.title, passages))
        if self.document is None or not 1 <= index <= len(self.document[1]):
            n = len(self.document[1]) if self.document else 0
            return self._rejected(tool, f"read[{index}]: "
                                  + (f"the open document has passages 1..{n}" if n else "open a document first"))
        title, passages = self.document
        return self._state(self.observed.read(title, index, passages[index - 1]))

    def _answer(self, text: str, q: Question) -> EngineStep:
        shown = self.observed.answered(text)
        self.score = exact_match(shown.facts["answer"], q.golden_answers)  # the only place gold answers are read
        return self._state(shown, reward=self.score, terminated=True)


def has_problem(arg: str) -> bool:
    """An argument with markup in it, too long, or nothing left once normalized."""
    return observe.has_markup(arg) or len(arg) > MAX_QUERY_CHARS or not normalize_query(arg)
