"""A catalogue timing suite's requests (a MetricWorkload, harness/config/suites.py MetricGate) on a live server: its
warm-up, then its measured prompts, one at a time; and one metric's samples out of them, every failed request
counted (a failure is no sample, never dropped)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from harness.config.workloads import MetricWorkload
from harness.measure.loadgen import Endpoint, LevelSamples, RequestSample, run_level
from harness.measure.prompts import metric_prompts, token_space


@dataclass(frozen=True)
class MetricSamples:
    level: LevelSamples  # the measured requests' samples (aborted: why the level stopped)
    requests: int  # measured requests planned


def run_metric_workload(live, w: MetricWorkload, extra: dict | None = None) -> MetricSamples:
    """The warm-up (not counted), then the measured requests; `extra` adds request fields (e.g. a cache_salt)."""
    warmup, measured = metric_prompts(w, token_space(live.arm, w))
    to = Endpoint.of(live)
    if warmup:
        asyncio.run(run_level(to, warmup, w.output_tokens, 1, 0, extra=extra))
    level = asyncio.run(run_level(to, measured, w.output_tokens, 1, 1, extra=extra))
    return MetricSamples(level, len(measured))


def metric_fields(measured: MetricSamples, value: Callable[[RequestSample], float | None]) -> dict:
    """A MetricRecord's samples, requests, failed and errors: a request that failed, had no value or was never
    sent (the level aborted) is a failure."""
    values = [(s, value(s) if s.ok else None) for s in measured.level.samples]
    failed = [s for s, v in values if v is None]
    return {"samples": [v for _, v in values if v is not None], "requests": measured.requests,
            "failed": len(failed) + measured.requests - len(measured.level.samples),
            "errors": [s.error or "no value measured" for s in failed][:3]}
