"""Success statistics shared by the trainer's held-out evaluation and ``rubricgym eval``:
Wilson intervals, the unbiased pass@k and pass^k, and the exact McNemar test. Pure functions
of counts (no torch), so eval's worker processes stay light."""

from __future__ import annotations

import math

__all__ = ["Z95", "mcnemar_exact", "pass_at_k", "pass_hat_k", "wilson_interval"]

Z95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion: unlike the normal approximation it
    stays inside [0, 1] and is not empty at 0 or n successes (small eval sets)."""
    if trials <= 0:
        raise ValueError(f"a success interval needs at least one trial, got {trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in [0, {trials}], got {successes}")
    p = successes / trials
    z2n = z * z / trials
    center = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / trials + z2n / (4 * trials))
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == trials else min(1.0, center + half)
    return low, high


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of P(at least one of k samples succeeds) from n samples with c
    successes (Chen et al. 2021): 1 - C(n-c, k) / C(n, k).

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4), round(pass_at_k(4, 2, 2), 4)
    (0.25, 1.0, 0.8333)
    """
    _check(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k (tau-bench's reliability): the unbiased estimate of P(all k samples succeed),
    C(c, k) / C(n, k).

    >>> pass_hat_k(4, 4, 4), pass_hat_k(4, 3, 4), round(pass_hat_k(4, 3, 2), 4)
    (1.0, 0.0, 0.5)
    """
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (A succeeded where B failed,
    and the reverse): a binomial test of ``only_a`` out of ``only_a + only_b`` at 1/2.

    >>> mcnemar_exact(0, 0), round(mcnemar_exact(0, 6), 4), round(mcnemar_exact(3, 5), 4)
    (1.0, 0.0312, 0.7266)
    """
    if only_a < 0 or only_b < 0:
        raise ValueError("discordant pair counts are non-negative")
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)
