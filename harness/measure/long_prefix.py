"""The long-prefix workload against one live server: warm-up (cold start), then each concurrency level,
with /metrics and NVML sampled beside it. I/O here; the summaries are pure functions below."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from harness.config.errors import ConfigError
from harness.config.workloads import LongPrefixWorkload
from harness.console import progress
from harness.measure.loadgen import Endpoint, LevelSamples, RequestSample, run_level
from harness.measure.prompts import Prompts
from harness.measure.telemetry import (
    MetricsSampler,
    NvmlSampler,
    counter_delta,
    gpu_memory_between,
    series_lines,
    usage_between,
)
from harness.measure.textbasis import to_ids, to_text
from harness.plan.preflight import check_workload_fits
from harness.records.jsonl import write_jsonl
from harness.records.schema import LongPrefixRecord, Summary, buffered_reason
from harness.serve.launch import LiveServer

log = logging.getLogger(__name__)


@dataclass
class LevelMeasurement:
    concurrency: int
    batch: LevelSamples
    before: dict[str, float] | None  # /metrics just before and after the level (counter deltas)
    after: dict[str, float] | None
    telemetry_path: Path | None = None  # the level's /metrics + NVML time series (JSONL)


@dataclass
class Measurement:
    warmup: LevelSamples
    levels: list[LevelMeasurement]
    metrics_points: list
    nvml_points: list
    nvml_available: bool
    scrape_errors: int = 0  # failed /metrics scrapes over the whole workload
    nvml_error: str | None = None


async def check_text_fits(live: LiveServer, workload: LongPrefixWorkload, texts: list[str]) -> None:
    """Text prompts as the server will count them (its /tokenize) against the arm's max_model_len, before anything
    is timed: a prompt that re-tokenizes past it fails here with the numbers, not as a rejected request mid-level."""
    counted = await to_ids(live.info.base_url, live.arm.model.served_name, texts)
    fits = check_workload_fits(workload.name, workload.prompt_tokens, workload.output_tokens, live.arm.name,
                               live.arm.model.max_model_len, "text", max(map(len, counted)))
    if not fits.ok:
        raise ConfigError(fits.detail)


async def measure(live: LiveServer, workload: LongPrefixWorkload, prompts: Prompts, out_dir: Path) -> Measurement:
    base, model = live.info.base_url, live.arm.model.served_name
    to = Endpoint.of(live)
    out_dir.mkdir(parents=True, exist_ok=True)
    sampler = MetricsSampler(base, workload.metrics_interval_s)
    nvml = NvmlSampler(live.arm.gpus)  # NVML counts physical GPUs: CUDA_VISIBLE_DEVICES does not apply
    warm, measured = prompts.warmup, prompts.measured
    if workload.prompt_basis == "text":  # before anything is timed: the server's own text for the same ids
        warm = await to_text(base, model, warm)
        measured = {c: await to_text(base, model, p) for c, p in measured.items()}
        await check_text_fits(live, workload, [*warm, *(t for level in measured.values() for t in level)])
    tasks = [asyncio.ensure_future(sampler.run()), asyncio.ensure_future(nvml.run(workload.metrics_interval_s))]
    try:
        warmup = await run_level(to, warm, workload.output_tokens, 1, 0, out_dir / "long_prefix_warmup.jsonl")
        levels: list[LevelMeasurement] = []
        if warmup.aborted is None:
            for c in workload.concurrency:
                before = await sampler.scrape_once()
                with progress.bar(f"{live.arm.name}: long_prefix c{c}", len(prompts.measured[c]), "requests") as bar:
                    batch = await run_level(to, measured[c], workload.output_tokens, c, c,
                                            out_dir / f"long_prefix_c{c}.jsonl", bar.update)
                log.info("arm %s: long_prefix c%d: %d requests done%s", live.arm.name, c, len(batch.samples),
                         f"; aborted: {batch.aborted.splitlines()[0]}" if batch.aborted else "")
                after = await sampler.scrape_once()
                series = out_dir / f"telemetry_c{c}.jsonl"
                write_jsonl(series, series_lines(sampler.points, nvml.points, batch.start_ns, batch.end_ns))
                levels.append(LevelMeasurement(c, batch, before, after, series))
                if batch.aborted:
                    break
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return Measurement(warmup, levels, sampler.points, nvml.points, nvml.available, sampler.errors,
                       nvml.reason or None)


def request_errors(samples: list[RequestSample]) -> list[str]:
    return [f"request {s.index}: {s.error}" for s in samples if s.error]


def level_fields(level: LevelMeasurement, m: Measurement) -> dict:
    """Everything a LongPrefixRecord holds about one level, computed from raw samples and points. One buffered
    request voids the level's TTFT, TPOT and ITL (schema.LongPrefixRecord.buffered_requests says why); E2E stays."""
    batch = level.batch
    ok = [s for s in batch.samples if s.ok]
    window = (batch.start_ns, batch.end_ns)
    buffered = sum(1 for s in ok if s.buffered)
    timed = [] if buffered else ok
    return {
        "concurrency": level.concurrency,
        "status": "aborted" if batch.aborted else "complete",
        "reason": batch.aborted,
        "requests": len(batch.samples),
        "failed": sum(1 for s in batch.samples if not s.ok),
        "errors": request_errors(batch.samples),
        "ttft": Summary.of([s.ttft_s for s in timed if s.ttft_s is not None]),
        "tpot": Summary.of([s.tpot_s for s in timed if s.tpot_s is not None]),
        "tpot_samples_s": [round(s.tpot_s, 9) for s in timed if s.tpot_s is not None],
        "bursty_requests": sum(1 for s in ok if s.bursty),
        "buffered_requests": buffered,
        "timing_invalid": buffered_reason(buffered, len(ok)) if buffered else None,
        "itl": Summary.of([x for s in timed for x in s.itl_s]),
        "e2e": Summary.of([s.latency_ns * 1e-9 for s in ok]),
        "prompt_tokens_mean": mean(counted) if (counted := [s.prompt_tokens for s in ok if s.prompt_tokens]) else None,
        "timed_to_tokens": max((s.prompt_tokens + s.output_tokens for s in ok if s.prompt_tokens and s.output_tokens),
                               default=None),
        "kv_usage": usage_between(m.metrics_points, "kv_usage", *window),
        "gpu_memory_mib": gpu_memory_between(m.nvml_points, *window) if m.nvml_available else None,
        "running_peak": (u.peak if (u := usage_between(m.metrics_points, "running", *window)) else None),
        "waiting_peak": (u.peak if (u := usage_between(m.metrics_points, "waiting", *window)) else None),
        "prefix_cache_hits": counter_delta(level.before, level.after, "prefix_hits"),
        "prefix_cache_queries": counter_delta(level.before, level.after, "prefix_queries"),
        "telemetry_path": str(level.telemetry_path) if level.telemetry_path else None,
        "metrics_scrape_errors": m.scrape_errors,
        "nvml_error": m.nvml_error,
    }


def level_records(m: Measurement, workload: LongPrefixWorkload, prompts: Prompts, out_dir: Path) -> list[dict]:
    """The LongPrefixRecord fields of every measured level; a level cut short says how many requests never ran."""
    out = []
    for level in m.levels:
        fields = level_fields(level, m)
        if fields["reason"]:
            unfinished = len(prompts.measured[level.concurrency]) - fields["requests"]
            fields["reason"] += f"; {unfinished} request(s) not finished"
        out.append({**fields, "workload": workload.name, "prompts_sha": prompts.fingerprint(),
                    "prompt_basis": workload.prompt_basis,
                    "samples_path": str(out_dir / f"long_prefix_c{level.concurrency}.jsonl")})
    return out


def cold_start_fields(m: Measurement, workload: LongPrefixWorkload, steady: LongPrefixRecord | None,
                      factor: float) -> dict:
    """The first request after start (the first warm-up) against the steady state (`steady`: the first level's
    record), as a ColdStartRecord's fields."""
    cold = m.warmup.samples[0] if m.warmup.samples else None
    tpot = cold.tpot_s if cold else None
    steady_p50 = steady.tpot.p50 if steady else None
    return {"workload": workload.name, "ttft_s": cold.ttft_s if cold else None, "tpot_s": tpot,
            "steady_tpot_p50_s": steady_p50, "factor_limit": factor,
            "flagged": tpot is not None and steady_p50 is not None and tpot > factor * steady_p50,
            "error": cold.error if cold else None,
            "no_data": cold_start_gap(cold, steady, workload.concurrency[0])}


def cold_start_gap(cold: RequestSample | None, steady: LongPrefixRecord | None, level: int) -> str | None:
    """Why the cold-start check has nothing to compare (its no-data reason), else None."""
    if cold is None or not cold.ok:
        return f"the warm-up request failed: {cold.error}" if cold and cold.error else "no warm-up request finished"
    if cold.buffered:
        return "the first request's output arrived at once (buffered stream): its TPOT is not a timing"
    if cold.tpot_s is None:
        return "the first request has no TPOT (fewer than 2 output tokens)"
    if steady is None:
        return f"no c{level} level to compare with"
    if steady.timing_invalid:
        return f"c{level}: {steady.timing_invalid}"
    if steady.tpot.p50 is None:
        return f"c{level} has no TPOT p50 ({steady.status}, {steady.failed}/{steady.requests} request(s) failed)"
    return None


def server_death(m: Measurement) -> str | None:
    """Why the workload stopped early (the server died), else None."""
    return m.warmup.aborted or next((lv.batch.aborted for lv in m.levels if lv.batch.aborted), None)
