"""Percentile summaries (pure). Linear interpolation, as numpy and `vllm bench serve` use."""

from __future__ import annotations

import math

from pydantic import BaseModel


class Summary(BaseModel):
    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


def percentile(sorted_values: list[float], q: float) -> float:
    """q in [0, 100]; numpy.percentile's default (linear) method."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(values: list[float]) -> Summary:
    if not values:
        return Summary(n=0, mean=None, p50=None, p90=None, p99=None)
    s = sorted(values)
    return Summary(n=len(s), mean=sum(s) / len(s), p50=percentile(s, 50), p90=percentile(s, 90),
                   p99=percentile(s, 99))


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile over cumulative (upper bound, count) buckets, q in [0, 1]."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = q * buckets[-1][1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            return prev_bound + (bound - prev_bound) * ((rank - prev_count) / max(count - prev_count, 1e-12))
        prev_bound, prev_count = bound, count
    return buckets[-1][0]


def mcnemar_exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value on discordant pairs (b: only the reference right, c: only the candidate)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval for k successes out of n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test (unpaired: different or unmatched questions)."""
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    z = abs(k1 / n1 - k2 / n2) / se
    return math.erfc(z / math.sqrt(2))
