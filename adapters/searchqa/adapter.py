"""``SearchQAAdapter``: search-augmented question answering behind rubricgym's adapter contract.

One engine, two action grammars:

* ``"search-r1"`` (default): ``<search>q</search>`` returns the top-k passages inside
  ``<information>``; ``<answer>a</answer>`` ends the episode. The first block decides.
* ``"trca"``: ``<action>search[q]</action>`` lists results (title + snippet), ``open[i]``
  opens result i's document (numbered passages), ``read[j]`` shows passage j in full,
  ``answer[text]`` ends the episode; every observation lists the admissible commands.

The terminal reward is exact match against the gold aliases; gold answers are read only
there. Facts come from the action and the text the retriever returned.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any, ClassVar

from rubricgym.adapter import Adapter, EngineFailure, EngineReset, EngineState, EngineStep
from rubricgym.adapters.searchqa import observe
from rubricgym.adapters.searchqa.answers import answer_kind, contains_phrase, exact_match, normalize_answer, normalize_query, value_kinds
from rubricgym.adapters.searchqa.binder import bind_task
from rubricgym.adapters.searchqa.data import BUNDLED_CORPUS, BUNDLED_QUESTIONS, Passage, Question, load_questions
from rubricgym.adapters.searchqa.facts import SearchQABinding, SearchQAFacts
from rubricgym.adapters.searchqa.retrieval import MAX_QUERY_CHARS, Hit, Retriever, bm25_for_file
from rubricgym.benchmark import ExpertAction
from rubricgym.contract import Outcome, ParsedAction
from rubricgym.parsing import ACTION_GRAMMAR, TagGrammar

SEARCH_R1_GRAMMAR = TagGrammar(action_tags=("search", "answer"), reasoning_tag="think", on_multiple="first")
GRAMMARS = {"search-r1": SEARCH_R1_GRAMMAR, "trca": ACTION_GRAMMAR}
MAX_ANSWER_CHARS = 200


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
            from rubricgym.adapters.searchqa.http_client import HTTPRetriever

            self.retriever = HTTPRetriever(server_url, timeout=server_timeout, attempts=server_attempts)
        else:
            self.retriever = bm25_for_file(corpus or BUNDLED_CORPUS)
        self._q: Question | None = None
        self._binding = SearchQABinding()
        self._new_episode()

    # -- episode state ------------------------------------------------------------------
    def _new_episode(self) -> None:
        self.turn = 0
        self.queries: list[str] = []
        self.listed_ids: set[str] = set()
        self.read_ids: set[str] = set()
        self.shown_norm: list[str] = []        # normalized text of everything shown, for answer grounding
        self.names_seen: set[str] = set()      # capitalised words shown, for discovered entities
        self.seen_targets: list[str] = []
        self.results: list[Passage] = []       # the last search's results
        self.document: tuple[str, list[Passage]] | None = None
        self.page = "start"
        self.page_ids: list[str] = []
        self.answer: str | None = None
        self.score = 0.0

    def _signature(self) -> str:
        doc = self.document[0] if self.document else ""
        raw = f"{self.page}|{','.join(self.page_ids)}|{doc}|{self.answer is not None}"
        return hashlib.sha1(raw.encode()).hexdigest()[:16]

    def _context_key(self, tool: str) -> str:
        targets = self._binding.target_entities
        evidence = "none" if not self.seen_targets else ("all" if len(self.seen_targets) >= len(targets) else "some")
        return (f"tool={tool or 'none'}|searches={min(len(self.queries), 2)}|page={self.page}"
                f"|evidence={evidence}|answered={self.answer is not None}")

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
            observation=observation, instruction=self._q.question, state_signature=self._signature(),
            context_key=self._context_key(""), benchmark_facts=self._standing_facts(),
            info={"question_id": self._q.id, "data_source": self._q.data_source, "grammar": self.grammar_name},
        )

    def step(self, action: ParsedAction) -> EngineStep:
        q = self.question()
        if self.answer is not None:
            raise EngineFailure("the episode already ended with an answer; reset first")
        self.turn += 1
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
            return self._search(arg, q)
        return self._open_or_read(tool, int(arg))

    def invalid_step(self, action: ParsedAction, state: EngineState) -> EngineStep:
        """An unparseable response uses a turn; Search-R1 answers with its fixed message."""
        self.turn += 1
        step = super().invalid_step(action, state)
        update: dict[str, Any] = {"benchmark_facts": self._standing_facts()}
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
                       detail={"question_id": q.id if q else None, "answer": self.answer, "turns": self.turn})

    def render_state(self) -> str:
        return f"{self.page} {self.page_ids} turn {self.turn}/{self.max_turns}"

    def close(self) -> None:
        self.retriever.close()

    # -- steps --------------------------------------------------------------------------
    def _standing_facts(self, **update: Any) -> dict[str, Any]:
        facts: dict[str, Any] = {"grammar": self.grammar_name, "searches": len(self.queries),
                                 "seen_targets": list(self.seen_targets), "turns_left": max(0, self.max_turns - self.turn)}
        facts.update(update)
        return facts

    def _budget(self) -> dict[str, Any]:
        """Truncate when the turn budget is spent without an answer."""
        return {"truncated": True} if self.turn >= self.max_turns and self.answer is None else {}

    def _state(self, observation: str, tool: str, facts: dict[str, Any], entities: list[str], **kw: Any) -> EngineStep:
        step = EngineStep(observation=self._with_listing(observation), state_signature=self._signature(),
                          entities=entities, context_key=self._context_key(tool),
                          benchmark_facts=self._standing_facts(tool=tool, **facts), **kw)
        return step.model_copy(update=self._budget())

    def _rejected(self, tool: str, message: str, malformed: bool = False) -> EngineStep:
        """Nothing executed: the state stays, the step is refused (action_allowed stays false).
        Search-R1 shows its fixed invalid-action message; the detail stays in error_text."""
        shown = observe.SEARCH_R1_INVALID if self.grammar_name == "search-r1" else message
        return self._state(shown, "" if malformed else tool, {"malformed": malformed}, [], accepted=False,
                           error_text=message)

    def _show(self, shown_text: str, passages: Sequence[Passage], full: bool) -> dict[str, Any]:
        """Record what the agent was shown; the facts about it."""
        ids = [p.id for p in passages]
        new_ids = [i for i in ids if i not in self.listed_ids and i not in self.read_ids]
        new_full = [p.id for p in passages if full and p.id not in self.read_ids]
        self.listed_ids.update(ids)
        if full:
            self.read_ids.update(ids)
        targets = self._binding.target_entities
        mentions = observe.mentioned(shown_text, targets)
        self.seen_targets = [t for t in targets if t in self.seen_targets or t in mentions]
        self.shown_norm.append(normalize_answer(shown_text))
        self.names_seen |= observe.name_words(shown_text)
        titles = list(dict.fromkeys(p.title for p in passages if p.title))
        return {"result_ids": ids, "new_result_ids": new_ids, "num_results": len(ids), "new_passage_ids": new_full,
                "result_titles": titles, "mentioned_targets": mentions,
                "target_titles": observe.title_matches(titles, targets), "revealed_value_kinds": value_kinds(shown_text)}

    def _search(self, query: str, q: Question) -> EngineStep:
        names_before = set(self.names_seen)
        norm = normalize_query(query)
        repeated = norm in self.queries
        try:
            hits: list[Hit] = self.retriever.search(query, self.topk)
        except Exception as exc:  # the retriever is the engine: its failure is never the policy's
            raise EngineFailure(f"retrieval failed: {exc}") from exc
        self.queries.append(norm)
        passages = [h.passage for h in hits]
        self.results, self.document = passages, None
        self.page, self.page_ids = "results", [p.id for p in passages]
        if self.grammar_name == "search-r1":
            observation = observe.render_information(passages)
            shown = " ".join(f"{p.title} {p.text}" for p in passages)
        else:
            observation = observe.render_results(query, passages)
            shown = observation
        facts = self._show(shown, passages, full=self.grammar_name == "search-r1")
        facts.update(query=norm, query_repeated=repeated, action_allowed=True,
                     query_targets=observe.mentioned(query, self._binding.target_entities),
                     query_uses_discovered_entity=observe.discovered_in_query(query, names_before, q.question),
                     searches=len(self.queries))
        return self._state(observation, "search", facts, facts["result_titles"])

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
            self.page, self.page_ids = "document", [p.id for p in passages]
            observation = observe.render_document(hit.title, passages)
            facts = self._show(observation, passages, full=False)
            facts.update(opened_title=hit.title, action_allowed=True)
            return self._state(observation, tool, facts, [hit.title] if hit.title else [])
        if self.document is None or not 1 <= index <= len(self.document[1]):
            n = len(self.document[1]) if self.document else 0
            return self._rejected(tool, f"read[{index}]: "
                                  + (f"the open document has passages 1..{n}" if n else "open a document first"))
        title, passages = self.document
        passage = passages[index - 1]
        self.page, self.page_ids = "passage", [passage.id]
        observation = observe.render_passage(title, index, passage)
        facts = self._show(f"{title} {passage.text}", [passage], full=True)
        facts.update(action_allowed=True)
        return self._state(observation, tool, facts, [title] if title else [])

    def _answer(self, text: str, q: Question) -> EngineStep:
        answer = text[:MAX_ANSWER_CHARS]
        grounded = any(contains_phrase(shown, answer) for shown in self.shown_norm)
        self.answer = answer
        self.score = exact_match(answer, q.golden_answers)  # the only place gold answers are read
        self.page, self.page_ids = "answered", []
        facts = {"answer": answer, "answer_words": len(normalize_answer(answer).split()), "answer_kind": answer_kind(answer),
                 "answer_in_evidence": grounded, "action_allowed": True}
        return self._state(f"Answer submitted: {answer}", "answer", facts, [], reward=self.score, terminated=True)


def has_problem(arg: str) -> bool:
    """An argument with markup in it, too long, or nothing left once normalized."""
    return observe.has_markup(arg) or len(arg) > MAX_QUERY_CHARS or not normalize_query(arg)


def expert_actions(adapter: SearchQAAdapter) -> list[ExpertAction]:
    """The oracle: search each hop's oracle query, (trca: open and read the supporting
    passage), then answer the first gold alias. Questions without oracle data (users'
    files) search the question itself."""
    q = adapter.question()
    queries = q.oracle_queries or [q.question]
    supporting = q.supporting_ids if q.oracle_queries else []
    if adapter.grammar_name == "search-r1":
        return [ExpertAction(query, "search") for query in queries] + [ExpertAction(q.golden_answers[0], "answer")]
    actions: list[ExpertAction] = []
    for hop, query in enumerate(queries):
        actions.append(ExpertAction(f"search[{query}]"))
        if hop >= len(supporting):
            continue
        ranked = [h.passage for h in adapter.retriever.search(query, adapter.topk)]
        index = next((i for i, p in enumerate(ranked, 1) if p.id == supporting[hop]), None)
        if index is None:
            continue
        document = adapter.retriever.document(ranked[index - 1].title) or [ranked[index - 1]]
        position = next(j for j, p in enumerate(document, 1) if p.id == supporting[hop]) if any(
            p.id == supporting[hop] for p in document) else 1
        actions += [ExpertAction(f"open[{index}]"), ExpertAction(f"read[{position}]")]
    return actions + [ExpertAction(f"answer[{q.golden_answers[0]}]")]
