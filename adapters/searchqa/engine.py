"""SearchQA's engine: retrieval backends behind one small interface, ``search(query, k) ->
list[Hit]``.

``BM25Retriever`` indexes a local corpus with bm25s (the default, offline); the HTTP client
for a Search-R1 style server lives in ``http_client.py`` (it needs httpx and tenacity, so
it is imported only when a server is used). Both return passages in rank order; a query
that matches nothing returns no hits (never zero-score filler).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel

from rubricgym.adapters.searchqa.data import Passage, load_corpus

MAX_QUERY_CHARS = 300  # longer queries are cut before tokenizing (a query is a line, not a page)


class Hit(BaseModel):
    passage: Passage
    score: float


@runtime_checkable
class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Hit]: ...

    def document(self, title: str) -> list[Passage]:
        """Every passage the backend can show under ``title``, in corpus order."""
        ...

    def close(self) -> None: ...


TOKEN = re.compile(r"\b\w\w+\b")  # bm25s's default token pattern (no backtracking)


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN  # optional: only the local index needs bm25s

    return frozenset(STOPWORDS_EN)


def tokenize_query(query: str) -> list[str]:
    """The tokens bm25s.tokenize(stopwords="en") makes of a query, without its per-call overhead."""
    stop = _stopwords()
    return [t for t in TOKEN.findall(query[:MAX_QUERY_CHARS].lower()) if t not in stop]


class BM25Retriever:
    """bm25s (Lucene BM25, English stop words, no stemming) over an in-memory corpus."""

    def __init__(self, passages: Sequence[Passage]):
        import bm25s  # optional: only the local index needs bm25s (a retrieval server does not)

        if not passages:
            raise ValueError("BM25Retriever needs at least one passage")
        self.passages = list(passages)
        self._by_title: dict[str, list[Passage]] = {}
        for p in self.passages:
            self._by_title.setdefault(p.title, []).append(p)
        texts = [f"{p.title} {p.text}" if p.title else p.text for p in self.passages]
        self._index = bm25s.BM25()
        self._index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int) -> list[Hit]:
        tokens = tokenize_query(query)
        if not tokens or k <= 0:
            return []
        k = min(k, len(self.passages))
        scores = self.scores(tokens)
        return [Hit(passage=self.passages[i], score=float(scores[i])) for i in top_k(scores, k)]

    def scores(self, tokens: list[str]) -> np.ndarray:
        """bm25s's BM25 scores of every passage, computed as its ``get_scores`` does (same
        float32 sums in the same order) but with one vectorised add per query token instead
        of ``np.add.at`` (a document occurs once per token column, so the two agree)."""
        index = self._index
        data, indices, indptr = index.scores["data"], index.scores["indices"], index.scores["indptr"]
        ids = [index.vocab_dict[t] for t in tokens if t in index.vocab_dict]
        out = np.zeros(index.scores["num_docs"], dtype=np.dtype(index.dtype))
        for token_id in ids:
            start, end = indptr[token_id], indptr[token_id + 1]
            out[indices[start:end]] += data[start:end]
        if index.nonoccurrence_array is not None and ids:
            out += index.nonoccurrence_array[np.asarray(ids)].sum()
        return out

    def document(self, title: str) -> list[Passage]:
        return list(self._by_title.get(title, []))

    def close(self) -> None:
        pass


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k best positive scores, best first; ties go to the earlier passage."""
    candidates = np.flatnonzero(scores > 0)
    if k < len(candidates):
        values = scores[candidates]
        threshold = np.sort(values)[len(values) - k]  # a full sort: partition degrades on many equal scores
        candidates = candidates[values >= threshold]
    order = np.lexsort((candidates, -scores[candidates]))
    return [int(i) for i in candidates[order[:k]]]


_CACHE: OrderedDict[tuple[str, int, int], BM25Retriever] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHE_SIZE = 4


def bm25_for_file(path: str | Path) -> BM25Retriever:
    """A BM25 index of a corpus file, shared by every env made in this process over the same
    unchanged file (building it is the expensive part of ``gym.make``)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    retriever = BM25Retriever(load_corpus(path))
    with _CACHE_LOCK:
        _CACHE[key] = retriever
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return retriever
