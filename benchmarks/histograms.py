"""Server-side histograms for the benchmarks: what vLLM itself measured between two /metrics scrapes.

Only the benchmarks compare against these; the harness's own figures come from its client's samples.
"""

from __future__ import annotations

import math

from harness.measure.metrics import samples

TPOT_HIST = "vllm:request_time_per_output_token_seconds"
TTFT_HIST = "vllm:time_to_first_token_seconds"
E2E_HIST = "vllm:e2e_request_latency_seconds"


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


def p50_bucket(delta: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(lower, upper] bounds of the bucket holding the median observation of cumulative buckets."""
    prev = 0.0
    for le, count in delta:
        if count >= delta[-1][1] / 2:
            return (prev, le)
        prev = le
    return None


def geometric_bounds(lo: float, hi: float, step: float) -> list[float]:
    """Bucket upper bounds lo, lo*(1+step), ... up to the first bound >= hi, rounded to 9 digits (nanoseconds): a
    median interpolated inside one bucket is then off by at most `step` of its value."""
    bounds = [lo]
    while bounds[-1] < hi:
        bounds.append(round(bounds[-1] * (1 + step), 9))
    return bounds


# `vllm serve --custom-histogram-buckets` (vLLM's ObservabilityConfig.custom_histogram_buckets, where the installed
# vLLM has it): 1 % buckets for the request TPOT histogram (family inter_token_latency, shared with ITL) and TTFT.
FINE_BUCKETS = {"inter_token_latency": geometric_bounds(0.0005, 2.0, 0.01),
                "time_to_first_token": geometric_bounds(0.005, 60.0, 0.01)}


def histogram_sum_count(text: str, name: str) -> tuple[float, float]:
    """A histogram's _sum and _count, summed over label sets."""
    return (sum(v for _, v in samples(text, f"{name}_sum")), sum(v for _, v in samples(text, f"{name}_count")))


def server_p50(before: str, after: str) -> dict:
    """The server's own TTFT and TPOT medians over the requests that finished between two /metrics scrapes, the
    bucket each median fell in (its resolution), and their means from the histograms' _sum/_count, which no bucket
    rounds: vLLM's per-request TPOT is decode time / (output tokens - 1), the clients' definition, so a client's mean
    TPOT over the same requests should equal the server's whatever the buckets."""
    out = {}
    for key, name in (("ttft", TTFT_HIST), ("tpot", TPOT_HIST)):
        delta = bucket_delta(histogram_buckets(before, name), histogram_buckets(after, name))
        out[key] = histogram_quantile(0.5, delta)
        out[key + "_bucket"] = p50_bucket(delta)
        (s0, n0), (s1, n1) = histogram_sum_count(before, name), histogram_sum_count(after, name)
        out[key + "_mean"] = (s1 - s0) / (n1 - n0) if n1 > n0 else None
    # End-to-end latency does not depend on where a client and the server split TTFT from TPOT (on a loaded server
    # the client sees its first token late and its TPOT low by as much): the split-free check of a client.
    (s0, n0), (s1, n1) = histogram_sum_count(before, E2E_HIST), histogram_sum_count(after, E2E_HIST)
    out["e2e_mean"] = (s1 - s0) / (n1 - n0) if n1 > n0 else None
    return out
