"""DRACO step credit (docs/design.md §5, steps 5-8): pure functions over numpy arrays.

The judge layer (``rubricgym.judges``) turns LLM verdicts into the integer arrays these
functions take; nothing here calls a model, reads a file or knows about trajectories.

Verdict codes (one per rollout x criterion): VERDICT_PASS = 1, VERDICT_FAIL = -1,
VERDICT_NOT_APPLICABLE = 0, VERDICT_UNANSWERED = 2 (the judge produced no usable verdict;
it counts as neither pass nor fail, and never as a failure for dropout).

Names are prefixed (``cited_step_advantages``, ``VERDICT_*``) because ``rubricgym.credit``
re-exports them next to the TRCA and GRPO functions.
"""

from __future__ import annotations

from enum import Enum
from collections.abc import Sequence

import numpy as np

from rubricgym.credit.grpo import DEFAULT_EPS, standardize

VERDICT_PASS = 1
VERDICT_FAIL = -1
VERDICT_NOT_APPLICABLE = 0
VERDICT_UNANSWERED = 2

_EQUAL_TOL = 1e-12


class DracoVariant(str, Enum):
    """The paper's four ablations: rubric source x step credit."""

    STATIC_NO_CREDIT = "static/no-credit"
    STATIC_CREDIT = "static/credit"
    DYNAMIC_NO_CREDIT = "dynamic/no-credit"
    DYNAMIC_CREDIT = "dynamic/credit"

    @property
    def dynamic(self) -> bool:
        """Criteria are proposed/extended/merged per group (else a static rubric file)."""
        return self in (DracoVariant.DYNAMIC_NO_CREDIT, DracoVariant.DYNAMIC_CREDIT)

    @property
    def step_credit(self) -> bool:
        """Steps get cited-verdict weights (else every step gets A_i, plain GRPO)."""
        return self in (DracoVariant.STATIC_CREDIT, DracoVariant.DYNAMIC_CREDIT)

    @classmethod
    def parse(cls, value: str | DracoVariant) -> DracoVariant:
        """Accepts the enum values, member names, and ``full`` for dynamic/credit."""
        if isinstance(value, DracoVariant):
            return value
        text = str(value).strip().lower().replace("_", "-")
        aliases = {"full": cls.DYNAMIC_CREDIT, "draco": cls.DYNAMIC_CREDIT}
        if text in aliases:
            return aliases[text]
        for member in cls:
            if text in (member.value, member.name.lower().replace("_", "-")):
                return member
        raise ValueError(f"unknown DRACO variant {value!r}; choose one of {[m.value for m in cls]} or 'full'")


# ---- group-level steps 5-7 ---------------------------------------------------------------


def discriminative_dropout(verdicts: np.ndarray) -> np.ndarray:
    """Step 5: keep a criterion only if at least one rollout of the group FAILED it.

    ``verdicts``: int array (G, C). Returns bool (C,). A criterion every member passes (or
    that is never applicable / never answered) cannot separate the group, so it is dropped.
    """
    v = np.asarray(verdicts)
    if v.ndim != 2:
        raise ValueError(f"verdicts must be (G, C), got shape {v.shape}")
    return np.any(v == VERDICT_FAIL, axis=0)


def rubric_rewards(verdicts: np.ndarray, surviving: np.ndarray | None = None) -> np.ndarray:
    """Step 6: R_i = (passes - fails) / (passes + fails) over surviving applicable criteria.

    0/0 (no surviving criterion was passed or failed by rollout i: all dropped, not
    applicable or unanswered) gives R_i = 0: no evidence either way, so no push.
    """
    v = np.asarray(verdicts)
    if v.ndim != 2:
        raise ValueError(f"verdicts must be (G, C), got shape {v.shape}")
    keep = np.ones(v.shape[1], dtype=bool) if surviving is None else np.asarray(surviving, dtype=bool)
    passes = np.sum((v == VERDICT_PASS) & keep, axis=1).astype(float)
    fails = np.sum((v == VERDICT_FAIL) & keep, axis=1).astype(float)
    total = passes + fails
    out = np.zeros(v.shape[0], dtype=float)
    np.divide(passes - fails, total, out=out, where=total > 0)
    return out


def group_advantages(rewards: np.ndarray, eps: float = DEFAULT_EPS) -> np.ndarray:
    """Step 7: A_i = group-standardized R_i, by the one rule every estimator shares
    (``rubricgym.credit.grpo.standardize``: population std, 0 for a zero-variance group)."""
    return standardize(rewards, eps)


def citation_counts(
    verdicts: np.ndarray, citations: np.ndarray, surviving: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Step 8 inputs for ONE rollout: p_j, f_j = passed / failed surviving criteria citing j.

    ``verdicts``: int (C,); ``citations``: bool (C, M), criterion c cites step j.
    """
    v = np.asarray(verdicts)
    cites = np.asarray(citations, dtype=bool)
    if cites.ndim != 2 or cites.shape[0] != v.shape[0]:
        raise ValueError(f"citations must be (C={v.shape[0]}, M), got {cites.shape}")
    keep = np.ones(v.shape[0], dtype=bool) if surviving is None else np.asarray(surviving, dtype=bool)
    passed = (v == VERDICT_PASS) & keep
    failed = (v == VERDICT_FAIL) & keep
    p = cites[passed].sum(axis=0).astype(np.int64)
    f = cites[failed].sum(axis=0).astype(np.int64)
    return p, f


# ---- step 8: step credit ------------------------------------------------------------------


def step_quality(passes: np.ndarray, fails: np.ndarray) -> np.ndarray | None:
    """Q_j = p_j / (p_j + f_j) for cited steps; uncited steps take the mean over cited ones.

    Returns None when no step is cited (the caller falls back to plain GRPO).
    """
    p = np.asarray(passes, dtype=float)
    f = np.asarray(fails, dtype=float)
    if p.shape != f.shape or p.ndim != 1:
        raise ValueError(f"passes and fails must be equal-length 1-D arrays, got {p.shape}, {f.shape}")
    if np.any(p < 0) or np.any(f < 0):
        raise ValueError("citation counts must be non-negative")
    cited = (p + f) > 0
    if not np.any(cited):
        return None
    q = np.zeros_like(p)
    q[cited] = p[cited] / (p[cited] + f[cited])
    q[~cited] = q[cited].mean()
    return q


def step_weights(advantage: float, quality: np.ndarray) -> np.ndarray:
    """w_j = Q_j for a winner (A_i >= 0), 1 - Q_j for a loser: losers blame failed steps."""
    q = np.asarray(quality, dtype=float)
    return q.copy() if advantage >= 0 else 1.0 - q


def cited_step_advantages(
    advantage: float,
    step_tokens: Sequence[int] | np.ndarray,
    passes: Sequence[int] | np.ndarray,
    fails: Sequence[int] | np.ndarray,
) -> np.ndarray:
    """Per-token advantage a_j of each step: a_j = A_i * N * w_j / (n_j * sum_k w_k).

    - N = sum of n_k: the push A_i * N that plain GRPO would give the rollout's step tokens
      is conserved (sum_j n_j * a_j = A_i * N), only redistributed by cited-verdict weights.
    - No step cited: plain GRPO, a_j = A_i.
    - All weights equal (including all zero): the equal share A_i * N / (M * n_j). As the
      paper states it, this can reinforce a failed step (a winner whose every cited step failed).
    - A step with n_j = 0 tokens has nothing to carry the signal: a_j = 0, and it takes no
      part in M, N or the weight sum (the conservation identity still holds). Its citations
      are still evidence about the rollout: they count in Q-bar, the quality an uncited step takes.
    """
    n = np.asarray(step_tokens, dtype=float)
    p = np.asarray(passes, dtype=float)
    f = np.asarray(fails, dtype=float)
    if n.ndim != 1 or n.shape != p.shape or n.shape != f.shape:
        raise ValueError(f"step_tokens, passes, fails must be equal-length 1-D, got {n.shape}, {p.shape}, {f.shape}")
    if np.any(n < 0):
        raise ValueError("step token counts must be non-negative")
    a = np.zeros_like(n)
    live = n > 0
    if not np.any(live):
        return a
    A = float(advantage)
    q_all = step_quality(p, f)  # over every step: a zero-token step's citations count in Q-bar
    if q_all is None:
        a[live] = A
        return a
    q = q_all[live]
    nl = n[live]
    N = nl.sum()
    M = nl.size
    w = step_weights(A, q)
    total = w.sum()
    if total <= _EQUAL_TOL or np.ptp(w) <= _EQUAL_TOL:
        a[live] = A * N / (M * nl)
    else:
        a[live] = A * N * w / (nl * total)
    return a


def uniform_step_advantages(advantage: float, step_tokens: Sequence[int] | np.ndarray) -> np.ndarray:
    """The no-credit ablation: every step token carries A_i (zero-token steps get 0)."""
    n = np.asarray(step_tokens, dtype=float)
    return np.where(n > 0, float(advantage), 0.0)


def expand_to_tokens(
    step_values: Sequence[float] | np.ndarray,
    step_spans: Sequence[tuple[int, int]],
    num_tokens: int,
) -> np.ndarray:
    """Broadcast per-step a_j to a per-token array; gap tokens (outside every step) get 0.

    ``step_spans``: ``[start, end)`` token ranges, one per step, non-overlapping and inside
    ``[0, num_tokens)``; the span lengths are the n_j the values were computed with.
    """
    vals = np.asarray(step_values, dtype=float)
    if len(step_spans) != vals.shape[0]:
        raise ValueError(f"{vals.shape[0]} step values but {len(step_spans)} spans")
    out = np.zeros(int(num_tokens), dtype=float)
    covered = np.zeros(int(num_tokens), dtype=bool)
    for value, (start, end) in zip(vals, step_spans):
        if not (0 <= start <= end <= num_tokens):
            raise ValueError(f"span [{start}, {end}) outside [0, {num_tokens})")
        if covered[start:end].any():
            raise ValueError(f"span [{start}, {end}) overlaps another step")
        covered[start:end] = True
        out[start:end] = value
    return out


def span_token_counts(step_spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """n_j from token spans."""
    return np.asarray([max(0, int(e) - int(s)) for s, e in step_spans], dtype=np.int64)


def draco_step_advantages(
    variant: DracoVariant | str,
    advantage: float,
    step_tokens: Sequence[int] | np.ndarray,
    passes: Sequence[int] | np.ndarray,
    fails: Sequence[int] | np.ndarray,
) -> np.ndarray:
    """Per-step advantages for a variant: cited-verdict credit or plain GRPO."""
    if DracoVariant.parse(variant).step_credit:
        return cited_step_advantages(advantage, step_tokens, passes, fails)
    return uniform_step_advantages(advantage, step_tokens)


__all__ = [
    "VERDICT_PASS",
    "VERDICT_FAIL",
    "VERDICT_NOT_APPLICABLE",
    "VERDICT_UNANSWERED",
    "DracoVariant",
    "discriminative_dropout",
    "rubric_rewards",
    "group_advantages",
    "citation_counts",
    "step_quality",
    "step_weights",
    "cited_step_advantages",
    "uniform_step_advantages",
    "draco_step_advantages",
    "expand_to_tokens",
    "span_token_counts",
]
