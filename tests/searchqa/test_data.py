"""Loaders for the published formats, and the bundled set's promises (sizes, hops, gold
answers in their supporting passages, distractors, two-hop difficulty, reproducibility)."""

from __future__ import annotations

import json

import pytest
from requirements_guard import need

from rubricgym.adapters.searchqa.answers import normalize_answer
from rubricgym.adapters.searchqa.data import (BUNDLED_CORPUS, BUNDLED_QUESTIONS, DataFormatError, Passage,
                                              load_corpus, load_questions)
from rubricgym.adapters.searchqa.engine import BM25Retriever
from rubricgym.adapters.searchqa.generate import HOP2_K, ORACLE_K
from rubricgym.adapters.searchqa.generate import main as generate

CORPUS = load_corpus(BUNDLED_CORPUS)
BY_ID = {p.id: p for p in CORPUS}
QUESTIONS = [q for split in ("train", "eval") for q in load_questions(BUNDLED_QUESTIONS[split])]


def _has(text: str, answer: str) -> bool:
    return f" {normalize_answer(answer)} " in f" {normalize_answer(text)} "


def test_bundled_sizes_and_splits():
    train, evaluation = (load_questions(BUNDLED_QUESTIONS[s]) for s in ("train", "eval"))
    assert len(CORPUS) >= 500 and len(QUESTIONS) >= 100
    assert {q.id for q in train}.isdisjoint({q.id for q in evaluation}) and evaluation
    for split in (train, evaluation):
        assert {q.hops for q in split} == {1, 2}


def test_gold_answers_supporting_passages_and_distractors():
    for q in QUESTIONS:
        assert len(q.supporting_ids) == q.hops == len(q.oracle_queries)
        assert all(pid in BY_ID for pid in q.supporting_ids + q.distractor_ids)
        final = BY_ID[q.supporting_ids[-1]]
        assert any(_has(final.text, g) for g in q.golden_answers), q.id
        assert len(q.distractor_ids) >= 3, q.id
        first_entity = BY_ID[q.supporting_ids[0]].title  # the entity the question names
        assert first_entity in q.question, q.id
        for pid in q.distractor_ids:
            d = BY_ID[pid]
            assert pid not in q.supporting_ids
            assert first_entity in f"{d.title} {d.text}", (q.id, pid)       # shares the question's entity
            assert not any(_has(d.text, g) for g in q.golden_answers), (q.id, pid)  # but not its answer
        if q.hops == 2:  # the bridge: the first passage names the second passage's entity
            assert BY_ID[q.supporting_ids[1]].title in BY_ID[q.supporting_ids[0]].text, q.id


def test_two_hop_second_passage_is_not_found_by_the_question_alone():
    index = BM25Retriever(CORPUS)
    two_hop = [q for q in QUESTIONS if q.hops == 2]
    assert len(two_hop) >= 30
    for q in two_hop:
        top = [h.passage.id for h in index.search(q.question, HOP2_K)]
        assert q.supporting_ids[1] not in top, q.id
    for q in QUESTIONS:  # while each hop's oracle query does find its passage
        for pid, query in zip(q.supporting_ids, q.oracle_queries):
            assert pid in [h.passage.id for h in index.search(query, ORACLE_K)], (q.id, query)


def test_generator_reproduces_the_committed_files(tmp_path):
    assert generate(["--out", str(tmp_path)]) == 0
    for name in ("corpus.jsonl", "train.jsonl", "eval.jsonl"):
        assert (tmp_path / name).read_bytes() == (BUNDLED_CORPUS.parent / name).read_bytes(), name


def test_corpus_formats(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "a", "contents": '"Paris"\nParis is in France.'}) + "\n\n"
                    + json.dumps({"id": 7, "title": "Berlin", "text": "Berlin is in Germany."}) + "\n"
                    + json.dumps({"id": "c", "contents": "no title line"}) + "\n")
    passages = load_corpus(path)
    assert passages == [Passage(id="a", title="Paris", text="Paris is in France."),
                        Passage(id="7", title="Berlin", text="Berlin is in Germany."),
                        Passage(id="c", title="", text="no title line")]
    assert passages[0].contents == '"Paris"\nParis is in France.'


@pytest.mark.parametrize("lines,match", [
    (['{"id": "a", "contents": "x"}', "{not json"], r":2: not JSON"),
    (['{"id": "a", "contents": "x"}', '{"id": "a", "contents": "y"}'], "duplicate passage id"),
    (['{"contents": "x"}'], "without an 'id'"),
    (['{"id": "a"}'], "neither 'contents' nor 'text'"),
    (["[1, 2]"], "expected an object"),
    ([""], "empty"),
])
def test_bad_corpus_files_are_refused_with_the_line(tmp_path, lines, match):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=match):
        load_corpus(path)


def test_question_files_jsonl_and_missing(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "nq1", "question": "who wrote x", "golden_answers": ["A", "B"],
                                "data_source": "nq"}) + "\n"
                    + json.dumps({"question": "hotpot style?", "answer": "Yes"}) + "\n")
    qs = load_questions(path)
    assert [(q.id, q.golden_answers, q.data_source) for q in qs] == [("nq1", ["A", "B"], "nq"), ("1", ["Yes"], "")]
    with pytest.raises(FileNotFoundError):
        load_questions(tmp_path / "missing.jsonl")
    path.write_text(json.dumps({"question": "q", "golden_answers": []}) + "\n")
    with pytest.raises(DataFormatError, match="golden_answers"):
        load_questions(path)
    path.write_text(json.dumps({"id": 1, "question": "q", "golden_answers": ["a"]}) + "\n"
                    + json.dumps({"id": 1, "question": "r", "golden_answers": ["b"]}) + "\n")
    with pytest.raises(DataFormatError, match="duplicate question ids"):
        load_questions(path)


def test_question_files_parquet(tmp_path):
    pa = need("pyarrow", "pip install 'rubricgym[searchqa]'")
    import pyarrow.parquet as pq

    table = pa.table({"id": ["train_0", "train_1"], "question": ["who wrote x?", "where is y?"],
                      "golden_answers": [["A", "a2"], ["B"]], "data_source": ["nq", "hotpotqa"]})
    path = tmp_path / "train.parquet"
    pq.write_table(table, path)
    qs = load_questions(path)
    assert [(q.id, q.question, q.golden_answers, q.data_source) for q in qs] == [
        ("train_0", "who wrote x?", ["A", "a2"], "nq"), ("train_1", "where is y?", ["B"], "hotpotqa")]
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(DataFormatError, match="not a readable Parquet"):
        load_questions(bad)
