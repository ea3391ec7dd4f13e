"""A catalogue timing suite's requests (a MetricWorkload, harness/config/suites.py MetricGate) on a live server: its
warm-up, then its measured prompts, one at a time; and one metric's samples out of them, every failed request
counted (a failure is no sample, never dropped)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from harness.config.workloads import MetricWorkload
from harness.measure.loadgen import LevelRun, RequestSample, run_level
from harness.measure.prompts import metric_prompts, token_space


@dataclass(frozen=True)
class MetricRun:
    level: LevelRun  # the measured requests' samples (aborted: why the level stopped)
    requests: int  # measured requests planned


def run_metric_workload(live, w: MetricWorkload, extra: dict | None = None) -> MetricRun:
    """The warm-up (not counted), then the measured requests; `extra` adds request fields (e.g. a cache_salt)."""
    warmup, measured = metric_prompts(w, token_space(live.arm, w))
    base, model, timeout = live.info.base_url, live.arm.model.served_name, live.arm.timeouts.request_s
    if warmup:
        asyncio.run(run_level(base, model, warmup, w.output_tokens, 1, 0, timeout, live.server.check_alive,
                              extra=extra))
    run = asyncio.run(run_level(base, model, measured, w.output_tokens, 1, 1, timeout, live.server.check_alive,
                                extra=extra))
    return MetricRun(run, len(measured))


def metric_fields(run: MetricRun, value: Callable[[RequestSample], float | None]) -> dict:
    """A MetricRecord's samples, requests, failed and errors: a request that failed, had no value or was never
    sent (the level aborted) is a failure."""
    values = [(s, value(s) if s.ok else None) for s in run.level.samples]
    failed = [s for s, v in values if v is None]
    return {"samples": [v for _, v in values if v is not None], "requests": run.requests,
            "failed": len(failed) + run.requests - len(run.level.samples),
            "errors": [s.error or "no value measured" for s in failed][:3]}
