"""Telemetry beside a workload: /metrics scraped at a fixed interval, NVML memory per GPU.

Samplers collect raw points; summaries are pure functions of them. On a machine without
an NVIDIA GPU the NVML summary is None (shown as n/a), never 0.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx

from harness.config.errors import WorkloadError
from harness.measure.http import aget_metrics
from harness.measure.metrics import samples_of
from harness.records.schema import Usage

SCRAPED = {
    "kv_usage": "vllm:kv_cache_usage_perc",
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "prefix_hits": "vllm:prefix_cache_hits_total",
    "prefix_queries": "vllm:prefix_cache_queries_total",
    "preemptions": "vllm:num_preemptions_total",
}
REQUIRED = ("kv_usage", "running", "waiting")  # the gauges every vLLM server exports


def scrape_values(text: str) -> dict[str, float]:
    """One point: each scraped metric summed over engines (a single engine in our arms). A page without vLLM's
    scheduler gauges (an error page, another server) is no point: ValueError, counted by the sampler, never zeros."""
    found = samples_of(text, SCRAPED.values())
    missing = [SCRAPED[key] for key in REQUIRED if not found[SCRAPED[key]]]
    if missing:
        raise ValueError(f"/metrics carries no {', '.join(missing)}: not a vLLM server's metrics page")
    return {key: sum(v for _, v in found[name]) for key, name in SCRAPED.items()}


@dataclass
class MetricsSampler:
    base_url: str
    interval_s: float
    points: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # (monotonic ns, values)
    errors: int = 0

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                t = time.perf_counter_ns()
                try:
                    self.points.append((t, scrape_values(await aget_metrics(client, self.base_url))))
                except (WorkloadError, ValueError):
                    self.errors += 1
                await asyncio.sleep(self.interval_s)

    async def scrape_once(self) -> dict[str, float] | None:
        async with httpx.AsyncClient(timeout=5.0) as client:
            try:
                return scrape_values(await aget_metrics(client, self.base_url))
            except (WorkloadError, ValueError):
                return None


class NvmlSampler:
    """Memory used per GPU (MiB) through NVML; `available` is False where there is no GPU/driver."""

    def __init__(self, gpu_indices: list[int] | None):
        self.points: list[tuple[int, dict[str, float]]] = []
        self.available = False
        self.reason = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            indices = gpu_indices if gpu_indices is not None else list(range(count))
            self._handles = {str(i): pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices}
            self._pynvml = pynvml
            self.available = bool(self._handles)
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound etc.: no GPU here
            self.reason = f"{type(exc).__name__}: {exc}"

    def sample(self) -> None:
        if not self.available:
            return
        t = time.perf_counter_ns()
        used = {i: self._pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20 for i, h in self._handles.items()}
        self.points.append((t, used))

    async def run(self, interval_s: float) -> None:
        while self.available:
            self.sample()
            await asyncio.sleep(interval_s)


def usage_between(points: list[tuple[int, dict[str, float]]], key: str, start_ns: int, end_ns: int) -> Usage | None:
    return Usage.of([v[key] for t, v in points if start_ns <= t <= end_ns and key in v])


def gpu_memory_between(points: list[tuple[int, dict[str, float]]], start_ns: int,
                       end_ns: int) -> dict[str, Usage] | None:
    window = [v for t, v in points if start_ns <= t <= end_ns]
    if not window:
        return None
    return {gpu: usage_between(points, gpu, start_ns, end_ns) for gpu in window[0]}


def counter_delta(before: dict[str, float] | None, after: dict[str, float] | None, key: str) -> float | None:
    if before is None or after is None:
        return None
    return after[key] - before[key]


def series_lines(metrics_points: list[tuple[int, dict[str, float]]], nvml_points: list[tuple[int, dict[str, float]]],
                 start_ns: int, end_ns: int) -> list[dict]:
    """The time series of one level (pure): seconds since the level started, source, values; in time order."""
    rows = [{"t_s": (t - start_ns) / 1e9, "source": source, "values": v}
            for source, points in (("metrics", metrics_points), ("nvml", nvml_points))
            for t, v in points if start_ns <= t <= end_ns]
    return sorted(rows, key=lambda r: r["t_s"])
