"""The capacity ramp for the report (pure): one row per arm and level, and the Pareto plot's data (throughput per
GPU against TPOT p50 per level, candidate and reference on one figure, the SLO drawn in)."""

from __future__ import annotations

import pandas as pd

from harness.config.thresholds import CapacityGates
from harness.judge.capacity import check_name, knee, level_verdict
from harness.judge.gates import latest
from harness.records.meaning import of_kind
from harness.records.schema import CapacityRecord, Record, ReferenceCheckRecord


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.1f}"


def num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def capacity_arms(records: list[Record], arm_order: list[str]) -> list[str]:
    seen = {r.arm for r in of_kind(records, CapacityRecord)}
    return [a for a in arm_order if a in seen] + sorted(seen - set(arm_order))


def capacity_table(records: list[Record], arm_order: list[str], limits: dict[str, CapacityGates],
                   candidates: set[str]) -> pd.DataFrame:
    """Per arm and level; `limits`: each arm's capacity thresholds (its own pair's), `candidates`: arms whose outputs
    were compared with a reference (a reference's levels meet the SLO on timing alone)."""
    checks = {(r.arm, r.check): r for r in of_kind(records, ReferenceCheckRecord)}
    rows = []
    for arm in capacity_arms(records, arm_order):
        levels = sorted(latest(records, CapacityRecord, arm), key=lambda r: r.concurrency)
        lim = limits.get(arm, CapacityGates())
        bend = knee(levels, lim.knee_gain)
        for r in levels:
            v = level_verdict(r, checks.get((arm, check_name(r.concurrency))), lim, needs_check=arm in candidates)
            kv = r.kv_usage.peak if r.kv_usage else None
            hit = (r.prefix_cache_hits / r.prefix_cache_queries if r.prefix_cache_queries else None)
            rows.append({
                "Arm": arm, "Concurrency": r.concurrency, "Requests": f"{r.requests - r.failed}/{r.planned}",
                "Output tok/s": num(r.output_tokens_per_s), "Per GPU": num(r.output_tokens_per_s and
                                                                           r.output_tokens_per_s / r.gpus),
                "Req/s": num(r.requests_per_s, "{:.2f}"),
                "TPOT p50/p99 ms": f"{ms(r.tpot.p50)}/{ms(r.tpot.p99)}"
                                   + (f" ({r.buffered_requests} buffered: delivery, not decode)"
                                      if r.buffered_requests else ""),
                "TTFT p50/p99 ms": f"{ms(r.ttft.p50)}/{ms(r.ttft.p99)}",
                "KV peak": "n/a" if kv is None else f"{100 * kv:.0f}%",
                "Preemptions": num(r.preemptions, "{:.0f}"), "Waiting peak": num(r.waiting_peak, "{:.0f}"),
                "Prefix hit": "n/a" if hit is None else f"{100 * hit:.0f}%",
                "Goodput req/s": num(v.goodput_rps, "{:.2f}"),
                "Saturated": r.saturation or "no", "Knee": "knee" if r.concurrency == bend else "",
                "SLO": "meets" if v.meets else f"broken: {v.why}"})
    return pd.DataFrame(rows)


def pareto_points(records: list[Record], arm_order: list[str]) -> dict[str, list[tuple[int, float, float]]]:
    """Per arm: (concurrency, TPOT p50 ms, output tokens/s per GPU) of each level with both."""
    out = {}
    for arm in capacity_arms(records, arm_order):
        pts = [(r.concurrency, r.tpot.p50 * 1e3, r.output_tokens_per_s / r.gpus)
               for r in sorted(latest(records, CapacityRecord, arm), key=lambda r: r.concurrency)
               if r.tpot.p50 is not None and r.output_tokens_per_s]
        if pts:
            out[arm] = pts
    return out
