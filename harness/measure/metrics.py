"""The server's Prometheus /metrics: fetched through harness.measure.http, parsed (pure) by prometheus_client."""

from __future__ import annotations

import re
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from harness.measure.http import get_metrics


def fetch_metrics(base_url: str, timeout_s: float = 10.0) -> str:
    return get_metrics(base_url, timeout_s)


SAMPLE_NAME = re.compile(r"[^{\s]+")


def samples_of(text: str, names: Iterable[str]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """(labels, value) of every sample of each named metric, in one pass; only their lines reach the (slow)
    parser, as the sampler runs beside the timed client. Names as exported ('vllm:prefix_cache_hits_total')."""
    wanted = set(names)
    lines = [line for line in text.splitlines()
             if (name := SAMPLE_NAME.match(line)) and not line.startswith("#") and name.group() in wanted]
    out: dict[str, list[tuple[dict[str, str], float]]] = {name: [] for name in wanted}
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        for sample in family.samples:
            if sample.name in out:
                out[sample.name].append((dict(sample.labels), sample.value))
    return out


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of one metric, e.g. 'vllm:kv_cache_usage_perc'."""
    return samples_of(text, [name])[name]


def counter_total(text: str, name: str) -> float | None:
    """A counter summed over its label sets (engines); None when the server does not export it."""
    found = samples(text, name)
    return sum(v for _, v in found) if found else None


def cache_config(text: str) -> dict[str, str]:
    """Labels of `vllm:cache_config_info` (engine 0): block_size, num_gpu_blocks, kv_cache_size_tokens, ..."""
    found = samples(text, "vllm:cache_config_info")
    by_engine = {labels.get("engine", ""): labels for labels, _ in found}
    return by_engine.get("0") or (found[0][0] if found else {})


def prefix_caching_on(arm_setting: bool | None, info: dict[str, str]) -> bool:
    """Whether the server caches prefixes: the arm did not turn it off, and vllm:cache_config_info does not say it is
    off (vLLM's own default where the arm leaves it unset)."""
    return arm_setting is not False and info.get("enable_prefix_caching") != "False"


def label_int(labels: dict[str, str], key: str) -> int | None:
    value = labels.get(key)
    try:
        return int(value) if value not in (None, "", "None") else None
    except ValueError:
        return None

