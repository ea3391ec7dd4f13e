"""The capacity ramp against one live server: each concurrency level in turn, /metrics sampled beside it, until the
server's own signals say it saturated. I/O in `ramp`; the prompts and a level's figures are pure functions.

Request i is the same prompt at every level and on both arms (the shared prefix + its own random suffix), so any
level's outputs can be checked against the reference's for the same prompt; each level sends them with a cache salt
of its own, so no level reuses another's KV: the cache really fills.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path

from harness.config.workloads import CapacityWorkload
from harness.console import progress
from harness.measure.loadgen import Endpoint, LevelSamples, RequestSample, run_level
from harness.measure.prompts import TokenSpace
from harness.measure.telemetry import MetricsSampler, counter_delta, usage_between
from harness.records.schema import Summary
from harness.serve.launch import LiveServer

log = logging.getLogger(__name__)


def build_capacity_prompts(w: CapacityWorkload, space: TokenSpace) -> list[list[int]]:
    """Pure: rounds x the top level's prompts; level c sends the first rounds x c of them."""
    allowed = space.allowed()
    rng = random.Random(w.seed)
    prefix = rng.choices(allowed, k=w.prefix_tokens)
    return [prefix + rng.choices(allowed, k=w.suffix_tokens) for _ in range(w.rounds * w.concurrency[-1])]


def level_prompts(w: CapacityWorkload, prompts: list[list[int]], c: int) -> list[list[int]]:
    return prompts[:w.rounds * c]


def prompts_sha(prompts: list[list[int]]) -> str:
    return hashlib.sha256(json.dumps(prompts).encode()).hexdigest()[:16]


def cache_salt(c: int) -> str:
    return f"harness-capacity-c{c}"


def saturation(w: CapacityWorkload, c: int, kv_peak: float | None, waiting_share: float | None,
               preemptions: float | None, running_peak: float | None, waiting_peak: float | None) -> str | None:
    """Which of the server's own signals says level c saturated it, with its value; None when none does."""
    if preemptions:
        return f"{preemptions:g} preemption(s) (vllm:num_preemptions)"
    if running_peak is not None and running_peak < c and waiting_peak:
        return f"at most {running_peak:g} of {c} requests in flight ran at once; the rest waited"
    if waiting_share is not None and waiting_share >= w.saturation_waiting_share:
        return (f"requests waiting in {100 * waiting_share:.0f}% of the level's /metrics points "
                f"(>= {100 * w.saturation_waiting_share:.0f}%)")
    if kv_peak is not None and kv_peak >= w.saturation_kv_usage:
        return f"KV usage peak {100 * kv_peak:.0f}% (>= {100 * w.saturation_kv_usage:.0f}%)"
    return None


def raw_tpot_s(sample) -> float | None:
    raw = sample.raw_tpot_ns
    return raw * 1e-9 if raw is not None else None


@dataclass(frozen=True)
class LevelMetrics:
    """The server's /metrics around one level: the points sampled while it ran (time ns, values) and the counters
    scraped just before and just after it (None where a scrape failed)."""
    points: list
    before: dict | None
    after: dict | None


def level_fields(w: CapacityWorkload, c: int, batch: LevelSamples, metrics: LevelMetrics, gpus: int, sha: str,
                 sink: Path, cut: str | None = None) -> dict:
    """Everything a CapacityRecord holds about one level (pure)."""
    window = (batch.start_ns, batch.end_ns)
    ok = [s for s in batch.samples if s.ok]
    ordered = sorted(batch.samples, key=lambda s: s.index)
    duration = max((batch.end_ns - batch.start_ns) * 1e-9, 1e-9)
    tokens = sum(s.output_tokens or 0 for s in ok)
    points, before, after = metrics.points, metrics.before, metrics.after
    kv = usage_between(points, "kv_usage", *window)
    waiting = [v["waiting"] for t, v in points if window[0] <= t <= window[1] and "waiting" in v]
    share = sum(1 for x in waiting if x > 0) / len(waiting) if waiting else None
    preempted = counter_delta(before, after, "preemptions")
    running = usage_between(points, "running", *window)
    queued = usage_between(points, "waiting", *window)
    saturated = saturation(w, c, kv.peak if kv else None, share, preempted, running.peak if running else None,
                           queued.peak if queued else None)
    reason = batch.aborted or cut
    return {
        "workload": w.name, "prompts_sha": sha, "concurrency": c,
        "status": "aborted" if batch.aborted else "cut" if cut else "complete", "reason": reason,
        "requests": len(batch.samples), "planned": w.rounds * c, "failed": len(batch.samples) - len(ok),
        "errors": [f"request {s.index}: {s.error}" for s in batch.samples if s.error],
        "duration_s": duration, "output_tokens": tokens,
        "output_tokens_per_s": tokens / duration if ok else None,
        "requests_per_s": len(ok) / duration if ok else None, "gpus": gpus,
        "ttft": Summary.of([s.ttft_s for s in ok if s.ttft_s is not None]),
        # the SLO takes every request's raw TPOT, buffered or not (else a starved CPU level has none); the buffered
        # count is shown beside it
        "tpot": Summary.of([raw_tpot_s(s) for s in ok if raw_tpot_s(s) is not None]),
        "ttft_samples_s": [s.ttft_s if s.ok else None for s in ordered],
        "tpot_samples_s": [raw_tpot_s(s) if s.ok else None for s in ordered],
        "buffered_requests": sum(1 for s in ok if s.buffered),
        "kv_usage": kv, "waiting_share": share,
        "running_peak": running.peak if running else None, "waiting_peak": queued.peak if queued else None,
        "preemptions": preempted,
        "prefix_cache_hits": counter_delta(before, after, "prefix_hits"),
        "prefix_cache_queries": counter_delta(before, after, "prefix_queries"),
        "saturated": saturated is not None, "saturation": saturated,
        "samples_path": str(sink),
    }


@dataclass
class RampLevel:
    fields: dict
    aborted: str | None


async def ramp(live: LiveServer, w: CapacityWorkload, prompts: list[list[int]], out_dir: Path) -> list[RampLevel]:
    """Each level in turn until saturation (+ levels_past_saturation), a cut level, or a dead server."""
    to = Endpoint.of(live)
    out_dir.mkdir(parents=True, exist_ok=True)
    sampler = MetricsSampler(to.base_url, w.metrics_interval_s)
    task = asyncio.ensure_future(sampler.run())
    levels: list[RampLevel] = []
    past = None
    try:
        # one untimed request first: a first request's one-off costs would fake a knee at c2 (docs/suites.md)
        await run_level(to, level_prompts(w, prompts, 1)[:1], w.output_tokens, 1, 0, out_dir / "capacity_warmup.jsonl",
                        extra={"cache_salt": "harness-capacity-warmup"})
        for c in w.concurrency:
            todo = level_prompts(w, prompts, c)
            sink = out_dir / f"capacity_c{c}.jsonl"
            sink.unlink(missing_ok=True)
            before = await sampler.scrape_once()
            t0 = time.perf_counter_ns()
            with progress.bar(f"{live.arm.name}: capacity c{c}", len(todo), "requests") as bar:
                try:
                    batch = await asyncio.wait_for(
                        run_level(to, todo, w.output_tokens, c, c, sink, bar.update, {"cache_salt": cache_salt(c)}),
                        timeout=w.max_level_s)
                    cut = None
                except TimeoutError:
                    batch, cut = partial_level(sink, t0), f"still running after max_level_s {w.max_level_s:g} s"
            after = await sampler.scrape_once()
            fields = level_fields(w, c, batch, LevelMetrics(sampler.points, before, after), served_gpus(live.arm),
                                  prompts_sha(todo), sink, cut)
            levels.append(RampLevel(fields, batch.aborted))
            log.info("arm %s: capacity c%d: %d/%d requests, %s", live.arm.name, c, fields["requests"],
                     fields["planned"], fields["saturation"] or "not saturated")
            if batch.aborted or cut:
                break
            if fields["saturated"] and past is None:
                past = 0
            elif past is not None:
                past += 1
            if past is not None and past >= w.levels_past_saturation:
                break
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return levels


def partial_level(sink: Path, t0_ns: int) -> LevelSamples:
    """A level cut at max_level_s: the requests that finished (its samples file), timed from its start."""
    samples = []
    if sink.is_file():
        for line in sink.read_text().splitlines():
            if line.strip():
                d = json.loads(line)
                d.pop("tpot_s", None), d.pop("ttft_s", None), d.pop("buffered", None)  # derived, not fields
                d["top"] = [{int(k): v for k, v in t.items()} for t in d.get("top") or []]
                samples.append(RequestSample(**d))
    return LevelSamples(samples, None, t0_ns, time.perf_counter_ns())


def served_gpus(arm) -> int:
    """GPUs one replica of the arm occupies (throughput per GPU divides by it); 1 on CPU."""
    return 1 if arm.device == "cpu" else arm.parallelism.world_size
