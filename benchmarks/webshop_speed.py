"""WebShop speed: steps per second and search latency, on the bundled catalogue and on a
synthetic catalogue of 100,000 products built here at benchmark time (never in tests).

Steps: the same action sequences (search with the instruction, open the first hit, read its
Features, go back, buy) played on the raw ``BundledShop`` engine and through
``gym.make("WebShop-Rubric-v0")`` without and with the TRCA operator library; the wrapped
rates are also given as ratios to the raw engine in the same run (rounds alternate so load
hits all sides alike). Search: BM25 latency p50/p99 of the goal instructions as queries.
The synthetic catalogue keeps the bundled products (so every goal stays valid) and adds
recombined variants of them (new ids, brands, attribute subsets, prices).

    python benchmarks/webshop_speed.py [--products 100000] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import rubricgym  # noqa: F401
from rubricgym.adapters.webshop.catalogue import Catalogue, Product, bundled_catalogue
from rubricgym.adapters.webshop.engine import BundledShop
from rubricgym.adapters.webshop.search import ProductIndex
from rubricgym.atomic_files import atomic_write_json

BRANDS = ["Acme", "Norde", "Vexa", "Corvo", "Lumo", "Tarn", "Quill", "Rivet", "Solace", "Brisk", "Kestrel", "Oakum"]


def synthetic_catalogue(n: int, seed: int = 0) -> Catalogue:
    """The bundled products plus ``n - len(bundled)`` recombined variants (deterministic)."""
    base = bundled_catalogue()
    rng = random.Random(seed)
    products: list[Product] = list(base.products)
    pool_by_type: dict[str, set[str]] = {}
    for p in base.products:
        pool_by_type.setdefault(p.product_type, set()).update(p.attributes)
    pools = {k: sorted(v) for k, v in pool_by_type.items()}
    for i in range(max(0, n - len(products))):
        src = base.products[rng.randrange(len(base.products))]
        attrs = rng.sample(pools[src.product_type], 3)
        stem = src.title.split(" with ")[0].split(" ", 1)[-1]
        title = f"{rng.choice(BRANDS)} {stem} with {attrs[0].title()}"
        products.append(src.model_copy(update={
            "asin": f"S{i:09d}", "title": title, "attributes": attrs, "price": round(src.price * rng.uniform(0.7, 1.4), 2),
            "bullet_points": [f"{a.capitalize()}: a feature you will notice" for a in attrs],
            "description": f"Meet the {title}. It comes with " + ", ".join(attrs) + ".",
        }))
    return Catalogue(source="synthetic benchmark catalogue (built at benchmark time)", products=products,
                     goals=base.goals)


def sequences(shop: BundledShop, goal_ids: list[str]) -> dict[str, list[str]]:
    out = {}
    for goal_id in goal_ids:
        goal = shop.goals[goal_id]
        hits = shop.index.search(goal.instruction_text)
        first = f"click[{hits[0].lower()}]" if hits else "click[back to search]"
        out[goal_id] = [f"search[{goal.instruction_text}]", first, "click[features]", "click[< prev]", "click[buy now]"]
    return out


def run_raw(shop: BundledShop, seqs: dict[str, list[str]]) -> tuple[float, int]:
    spent, steps = 0.0, 0
    for goal_id, actions in seqs.items():
        shop.reset(goal_id)
        for action in actions:
            t0 = time.perf_counter()
            shop.step(action)
            spent += time.perf_counter() - t0
            steps += 1
    return spent, steps


def run_env(env: gym.Env, seqs: dict[str, list[str]]) -> tuple[float, int]:
    spent, steps = 0.0, 0
    for goal_id, actions in seqs.items():
        env.reset(seed=0, options={"task_id": goal_id})
        for action in actions:
            response = f"<think>next</think><action>{action}</action>"
            t0 = time.perf_counter()
            env.step(response)
            spent += time.perf_counter() - t0
            steps += 1
    return spent, steps


def search_latency(index: ProductIndex, queries: list[str]) -> dict[str, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        index.search(q)
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    return {"queries": len(queries), "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean())}


def _with_catalogue(env: gym.Env, shop: BundledShop) -> gym.Env:
    env.unwrapped.adapter.shop = shop
    return env


def measure(label: str, catalogue: Catalogue, rounds: int, goal_count: int) -> dict:
    t0 = time.perf_counter()
    index = ProductIndex(catalogue.products)
    build_s = time.perf_counter() - t0
    shop = BundledShop(catalogue, split="train", index=index)
    goal_ids = list(shop.goals)[:goal_count]
    seqs = sequences(shop, goal_ids)
    plain = _with_catalogue(gym.make("WebShop-Rubric-v0", reward="none", max_steps=100),
                            BundledShop(catalogue, split="train", index=index))
    trca = _with_catalogue(gym.make("WebShop-Rubric-v0", max_steps=100), BundledShop(catalogue, split="train", index=index))
    run_raw(shop, seqs), run_env(plain, seqs), run_env(trca, seqs)  # warm-up (tagger, CEL compile)
    sides: dict[str, list[float]] = {"raw": [], "rubricenv": [], "rubricenv_trca": []}
    n = 0
    for _ in range(rounds):
        t, n = run_raw(shop, seqs)
        sides["raw"].append(t)
        t, n = run_env(plain, seqs)
        sides["rubricenv"].append(t)
        t, n = run_env(trca, seqs)
        sides["rubricenv_trca"].append(t)
    plain.close(), trca.close()
    rates = {k: n / statistics.median(v) for k, v in sides.items()}
    queries = [g.instruction_text for g in catalogue.goals]
    result = {
        "products": len(catalogue.products), "index_build_s": build_s, "steps_per_round": n,
        "steps_per_s": rates,
        "ratio_to_raw": {k: rates[k] / rates["raw"] for k in ("rubricenv", "rubricenv_trca")},
        "search_latency": search_latency(index, queries),
    }
    print(f"\n[{label}] {len(catalogue.products)} products, index built in {build_s:.2f} s")
    for k, v in rates.items():
        print(f"  {k:16s}: {v:8.1f} steps/s")
    lat = result["search_latency"]
    print(f"  search latency  : p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms over {lat['queries']} queries")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--products", type=int, default=100_000, help="size of the synthetic catalogue")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--goals", type=int, default=24, help="train goals played per round")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    results = {"bundled": measure("bundled catalogue", bundled_catalogue(), args.rounds, args.goals)}
    t0 = time.perf_counter()
    synthetic = synthetic_catalogue(args.products)
    print(f"\nsynthetic catalogue generated in {time.perf_counter() - t0:.1f} s")
    results["synthetic"] = measure(f"synthetic {args.products} products", synthetic, args.rounds, args.goals)
    results["search_p50_ratio_synthetic_to_bundled"] = (
        results["synthetic"]["search_latency"]["p50_ms"] / results["bundled"]["search_latency"]["p50_ms"])
    if args.json:
        atomic_write_json(args.json, results)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
