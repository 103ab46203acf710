"""SearchQA's expert player (the spec's ``expert``): the oracle that wins every bundled question."""

from __future__ import annotations

from rubricgym import ExpertAction
from rubricgym.adapters.searchqa.adapter import SearchQAAdapter


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
