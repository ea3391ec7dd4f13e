"""The server's Prometheus /metrics: fetch (I/O) and parse (pure, with prometheus_client's parser)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from harness.errors import WorkloadError


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
