"""SearchQA: search-augmented question answering (the Search-R1 protocol, or the TRCA paper's
``search[q]``/``open[i]``/``read[j]``/``answer[t]`` grammar) over a bm25s index of a local
corpus or a Search-R1 style retrieval server.

``bind_task(question)`` turns a question into a ``SearchQABinding`` (answer format, target
entities, relation, constraints) with deterministic rules, no model. It takes only the
question: gold answers never reach the binding. The adapter lives in ``adapter.py``, the
retriever in ``engine.py`` and the oracle in ``expert.py`` (imported on use: they need the
``searchqa`` extra).
"""

from rubricgym.adapters.searchqa.binder import bind_task
from rubricgym.adapters.searchqa.facts import SearchQABinding, SearchQAFacts

__all__ = ["SearchQABinding", "SearchQAFacts", "bind_task"]
