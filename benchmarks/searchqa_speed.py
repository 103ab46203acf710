"""SearchQA retrieval speed, measured in one run:

1. bm25s searches per second on the bundled corpus, against a plain-Python term-overlap scan
   of the same corpus (the baseline; ratio = bm25s / scan);
2. the same on a synthetic corpus of N passages (default 1,000,000) built here, at benchmark
   time, from a Zipf-distributed vocabulary: index build time, index memory, peak process
   memory, and searches per second (scan baseline on a few queries only: it is slow);
3. SearchQA env steps per second (Search-R1 oracle episodes, TRCA reward attached) and the
   share of step time spent in retrieval.

    .venv/bin/python benchmarks/searchqa_speed.py [--passages 1000000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

import numpy as np

from rubricgym.atomic_files import atomic_write_json

STOP = frozenset("a an the of in on at to for by from with and or is was it as".split())


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scan_baseline(texts: list[str]):
    """Term-overlap scoring over every passage in Python: the no-index baseline."""
    token_sets = [frozenset(w for w in t.lower().split() if w not in STOP) for t in texts]

    def search(query: str, k: int) -> list[int]:
        q = frozenset(w for w in query.lower().split() if w not in STOP)
        scores = [len(q & s) for s in token_sets]
        return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:k]

    return search


def rate(fn, queries: list[str], k: int) -> float:
    t = time.perf_counter()
    for q in queries:
        fn(q, k)
    return len(queries) / (time.perf_counter() - t)


def index_bytes(retriever) -> int:
    scores = getattr(retriever._index, "scores", {}) or {}
    return int(sum(v.nbytes for v in scores.values() if hasattr(v, "nbytes")))


def bundled(k: int) -> dict:
    from rubricgym.adapters.searchqa.data import BUNDLED_CORPUS, BUNDLED_QUESTIONS, load_corpus, load_questions
    from rubricgym.adapters.searchqa.engine import BM25Retriever

    passages = load_corpus(BUNDLED_CORPUS)
    queries = [q.question for s in ("train", "eval") for q in load_questions(BUNDLED_QUESTIONS[s])] * 4
    t = time.perf_counter()
    index = BM25Retriever(passages)
    build = time.perf_counter() - t
    scan = scan_baseline([f"{p.title} {p.text}" for p in passages])
    bm25 = rate(index.search, queries, k)
    base = rate(scan, queries, k)
    return {"passages": len(passages), "queries": len(queries), "index_build_s": round(build, 4),
            "bm25s_searches_per_s": round(bm25, 1), "scan_searches_per_s": round(base, 1),
            "speedup_vs_scan": round(bm25 / base, 2)}


def synthetic_texts(n: int, vocab: int, length: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i:05d}" for i in range(vocab)]
    ranks = np.minimum(rng.zipf(1.2, size=(n, length)) - 1, vocab - 1)
    texts = [" ".join(words[j] for j in row) for row in ranks]
    queries = [" ".join(words[j] for j in rng.integers(10, 5000, size=3)) for _ in range(200)]
    return texts, queries


def synthetic(n: int, k: int, scan_queries: int) -> dict:
    from rubricgym.adapters.searchqa.data import Passage
    from rubricgym.adapters.searchqa.engine import BM25Retriever

    t = time.perf_counter()
    texts, queries = synthetic_texts(n, vocab=50_000, length=40, seed=0)
    make = time.perf_counter() - t
    rss_before = peak_rss_mb()
    passages = [Passage(id=str(i), text=text) for i, text in enumerate(texts)]
    t = time.perf_counter()
    index = BM25Retriever(passages)
    build = time.perf_counter() - t
    bm25 = rate(index.search, queries, k)
    scan = scan_baseline(texts)
    base = rate(scan, queries[:scan_queries], k)
    return {"passages": n, "words_per_passage": 40, "vocabulary": 50_000, "corpus_generation_s": round(make, 2),
            "index_build_s": round(build, 2), "index_mb": round(index_bytes(index) / 2**20, 1),
            "peak_rss_before_index_mb": round(rss_before, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
            "queries": len(queries), "bm25s_searches_per_s": round(bm25, 1),
            "scan_queries": scan_queries, "scan_searches_per_s": round(base, 3), "speedup_vs_scan": round(bm25 / base, 1)}


def env_steps(episodes: int) -> dict:
    import gymnasium as gym

    import rubricgym  # noqa: F401
    from rubricgym.adapters.searchqa.expert import expert_actions

    env = gym.make("SearchQA-Rubric-v0")
    adapter = env.unwrapped.adapter
    inner = adapter.retriever.search
    spent = [0.0]

    def timed(query, k):
        t = time.perf_counter()
        try:
            return inner(query, k)
        finally:
            spent[0] += time.perf_counter() - t

    adapter.retriever.search = timed
    steps, total = 0, 0.0
    for task in list(adapter.task_ids())[:episodes]:
        env.reset(seed=0, options={"task_id": task})
        actions = expert_actions(adapter)
        t = time.perf_counter()
        for a in actions:
            env.step(f"<{a.kind}>{a.content}</{a.kind}>")
            steps += 1
        total += time.perf_counter() - t
    env.close()
    return {"steps": steps, "env_steps_per_s": round(steps / total, 1), "retrieval_share_of_step_time": round(spent[0] / total, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--scan-queries", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    result = {"bundled": bundled(args.k), "env": env_steps(args.episodes),
              "synthetic": synthetic(args.passages, args.k, args.scan_queries),
              "k": args.k, "load_average_1min": round(os.getloadavg()[0], 2), "cpu_count": os.cpu_count()}
    print(json.dumps(result, indent=2))
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
