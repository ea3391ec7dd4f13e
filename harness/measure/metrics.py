"""The server's Prometheus /metrics: fetched through harness.measure.http, parsed (pure) by prometheus_client."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from harness.measure.http import get_metrics


def fetch_metrics(base_url: str, timeout_s: float = 10.0) -> str:
    return get_metrics(base_url, timeout_s)


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

