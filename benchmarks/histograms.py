"""Server-side histograms for the benchmarks: what vLLM itself measured between two /metrics scrapes.

Only the benchmarks compare against these; the harness's own figures come from its client's samples.
"""

from __future__ import annotations

import math

from harness.measure.metrics import samples


def histogram_buckets(text: str, name: str) -> list[tuple[float, float]]:
    """Cumulative (upper bound, count) buckets of a histogram, summed over label sets other than `le`."""
    acc: dict[float, float] = {}
    for labels, value in samples(text, f"{name}_bucket"):
        le = float(labels["le"])
        acc[le] = acc.get(le, 0.0) + value
    return sorted(acc.items())


def bucket_delta(before: list[tuple[float, float]], after: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Buckets of the observations made between two scrapes."""
    prior = dict(before)
    return [(le, count - prior.get(le, 0.0)) for le, count in after]


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
