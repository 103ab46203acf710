"""The bm25s backend: query tokens as bm25s makes them, ranked hits, deterministic ties,
no zero-score filler, the per-file index cache."""

from __future__ import annotations

import json

import bm25s
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.adapters.searchqa.data import BUNDLED_QUESTIONS, Passage, load_questions
from rubricgym.adapters.searchqa.engine import BM25Retriever, bm25_for_file, tokenize_query, top_k


@given(st.text(max_size=200))
def test_query_tokens_equal_bm25s_tokenize(text):
    assert tokenize_query(text) == bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]


def test_bundled_queries_tokenize_like_bm25s():
    for q in load_questions(BUNDLED_QUESTIONS["eval"]):
        for text in [q.question, *q.oracle_queries]:
            assert tokenize_query(text) == bm25s.tokenize([text], stopwords="en", return_ids=False, show_progress=False)[0]


def test_top_k_orders_by_score_then_position():
    scores = np.array([0.0, 2.0, 1.0, 2.0, 0.5, 0.0])
    assert top_k(scores, 3) == [1, 3, 2]
    assert top_k(scores, 10) == [1, 3, 2, 4]
    assert top_k(np.zeros(4), 2) == []


def test_search_ranks_and_finds_nothing_for_unknown_words():
    r = BM25Retriever([Passage(id="p", title="Paris", text="Paris is the capital and most populous city of France."),
                       Passage(id="b", title="Berlin", text="Berlin is the capital of Germany."),
                       Passage(id="e", title="Eiffel Tower", text="The Eiffel Tower is a lattice tower in Paris.")])
    assert [h.passage.id for h in r.search("capital of France", 3)] == ["p", "b"]
    assert r.search("zzqx", 3) == [] and r.search("the of and", 3) == [] and r.search("", 3) == []
    assert [p.id for p in r.document("Berlin")] == ["b"] and r.document("Rome") == []


def test_index_cache_is_per_unchanged_file(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "1", "contents": '"A"\nalpha beta'}) + "\n")
    first = bm25_for_file(path)
    assert bm25_for_file(path) is first
    path.write_text(json.dumps({"id": "1", "contents": '"A"\nalpha beta gamma'}) + "\n")
    assert bm25_for_file(path) is not first


def test_scores_equal_bm25s_get_scores_exactly():
    from rubricgym.adapters.searchqa.data import BUNDLED_CORPUS, load_corpus

    r = BM25Retriever(load_corpus(BUNDLED_CORPUS))
    queries = [t for q in load_questions(BUNDLED_QUESTIONS["train"]) for t in [q.question, *q.oracle_queries]]
    for text in queries + ["river river town", "zzqx river"]:
        tokens = tokenize_query(text)
        assert np.array_equal(r.scores(tokens), r._index.get_scores(tokens)), text
