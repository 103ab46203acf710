"""BM25 product search (bm25s) with WebShop's result window: the top 50 hits, 10 per page.

Documents are a product's title, bullet points and description (and its attribute phrases).
Only products sharing at least one query term are hits; ties keep catalogue order, so a
query always gives the same list.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np
import regex

from rubricgym.adapters.webshop.catalogue import Product

SEARCH_RETURN_N = 50
PRODUCT_WINDOW = 10
_TOKEN = regex.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have i if in into is it its me my need of on or "
    "that the their them they this to was were will with would want like looking am".split()
)
MAX_QUERY_CHARS = 500


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords (linear scan, bounded input)."""
    return [t for t in _TOKEN.findall(text[:20_000].lower(), timeout=1.0) if t not in STOPWORDS]


def document_text(product: Product) -> str:
    return " ".join([product.title, *product.bullet_points, product.description, *product.attributes])


class ProductIndex:
    """A bm25s index over a product list, in that list's order."""

    def __init__(self, products: Sequence[Product]):
        self.asins = [p.asin for p in products]
        self._bm25 = bm25s.BM25()
        corpus = [tokenize(document_text(p)) or ["<empty>"] for p in products]
        self._bm25.index(corpus, show_progress=False)
        self._vocab = self._bm25.vocab_dict

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """Product ids of the top ``k`` hits for ``query`` (empty when no term is known)."""
        try:
            tokens = [t for t in tokenize(query[:MAX_QUERY_CHARS]) if t in self._vocab]
        except TimeoutError:
            return []
        if not tokens:
            return []
        scores = np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)
        hits = np.flatnonzero(scores > 0)
        if hits.size == 0:
            return []
        order = np.lexsort((hits, -scores[hits]))[:k]  # score desc, then catalogue order
        return [self.asins[i] for i in hits[order]]


def page_of(hits: Sequence[str], page: int) -> list[str]:
    return list(hits[(page - 1) * PRODUCT_WINDOW: page * PRODUCT_WINDOW])
