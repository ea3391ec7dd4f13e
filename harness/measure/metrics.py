"""The server's Prometheus /metrics: fetch (I/O) and parse (pure, with prometheus_client's parser)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from harness.config.errors import WorkloadError


def fetch_metrics(base_url: str, timeout_s: float = 10.0) -> str:
    try:
        resp = httpx.get(f"{base_url}/metrics", timeout=timeout_s)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise WorkloadError(f"GET {base_url}/metrics failed: {exc!r}") from None
    return resp.text


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of one metric, e.g. 'vllm:kv_cache_usage_perc'."""
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out.append((dict(sample.labels), sample.value))
    return out


def counter_total(text: str, name: str) -> float | None:
    """A counter summed over its label sets (engines); None when the server does not export it."""
    found = samples(text, name)
    return sum(v for _, v in found) if found else None


def cache_config(text: str) -> dict[str, str]:
    """Labels of `vllm:cache_config_info` (engine 0): block_size, num_gpu_blocks, kv_cache_size_tokens, ..."""
    found = samples(text, "vllm:cache_config_info")
    by_engine = {labels.get("engine", ""): labels for labels, _ in found}
    return by_engine.get("0") or (found[0][0] if found else {})


def label_int(labels: dict[str, str], key: str) -> int | None:
    value = labels.get(key)
    try:
        return int(value) if value not in (None, "", "None") else None
    except ValueError:
        return None


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
