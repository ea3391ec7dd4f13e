"""The catalogue's timing gates (harness/config/suites.py MetricGate): the median of the candidate's per-request
samples of one metric against the reference's, within a relative tolerance in the worse direction. Missing, empty or
partial samples read FAIL with the reason (a failed request is no sample, and a gate on the rest would be biased)."""

from __future__ import annotations

from harness.config.suites import MetricGate, Suite
from harness.config.thresholds import MetricGateLimits
from harness.judge.gates import GateResult, latest
from harness.records.schema import MetricRecord, Record


def metric_of(records: list[Record], arm: str, suite: str, metric: str) -> MetricRecord | None:
    return next((r for r in reversed(latest(records, MetricRecord, arm)) if r.suite == suite and r.metric == metric),
                None)


def missing(rec: MetricRecord | None, arm: str, suite: str, metric: str) -> str | None:
    """Why an arm's samples cannot be judged, None when they can."""
    if rec is None:
        return f"no {metric} of {arm} recorded (its {suite} test did not run or failed first)"
    if rec.failed:
        return (f"{rec.failed} of {rec.requests} {metric} requests of {arm} failed"
                + (f" (first: {rec.errors[0]})" if rec.errors else ""))
    if not rec.samples:
        return f"no {metric} samples of {arm}"
    return None


def metric_gate(records: list[Record], cand: str, ref: str, suite: Suite,
                limits: MetricGateLimits | None) -> GateResult:
    spec: MetricGate = suite.metric_gate
    tolerance = limits.tolerance if limits and limits.tolerance is not None else spec.tolerance
    enforced = limits.enforce if limits else True
    device = limits.arm_device if limits else None
    if (limits is None or limits.tolerance is None) and device is not None and device != spec.measured_on:
        # a tolerance measured on another device's noise would judge this arm silently: refuse instead
        return GateResult(suite.gate, suite.name, cand, ref, False,
                          f"FAIL (not measured for this arm: the catalogue's tolerance {spec.tolerance:g} is "
                          f"{spec.derivation}, measured on {spec.measured_on.upper()}; {cand} runs on "
                          f"{device.upper()}: set gates.yaml arms.{cand}.metric_gates.{suite.gate}.tolerance from "
                          f"clean runs of {cand})", enforced=enforced)
    mine, theirs = (metric_of(records, a, suite.name, spec.metric) for a in (cand, ref))
    why = missing(mine, cand, suite.name, spec.metric) or missing(theirs, ref, suite.name, spec.metric)
    if why:
        return GateResult(suite.gate, suite.name, cand, ref, False, f"FAIL (no data: {why})", enforced=enforced)
    c, r = mine.median, theirs.median
    ratio = c / r if r else float("inf")
    limit = 1 + tolerance if spec.better == "lower" else 1 - tolerance
    passed = ratio <= limit if spec.better == "lower" else ratio >= limit
    unit = mine.unit
    shown = (lambda v: f"{v * 1e3:.2f} ms") if unit == "s" else (lambda v: f"{v:.4g} {unit}")
    bound = "<=" if spec.better == "lower" else ">="
    source = "gates.yaml metric_gates" if limits and limits.tolerance is not None else spec.derivation
    detail = (f"{spec.metric} median {cand} {shown(c)} vs {ref} {shown(r)} (n {len(mine.samples)}/"
              f"{len(theirs.samples)}): {ratio:.2f}x, limit {bound} {limit:.2f}x"
              + (f" ({mine.detail})" if mine.detail else "")
              + ("" if passed else f"; the limit: {source}"))
    return GateResult(suite.gate, suite.name, cand, ref, passed, detail,
                      {"candidate_median": c, "reference_median": r, "ratio": ratio, "limit": limit,
                       "candidate_n": len(mine.samples), "reference_n": len(theirs.samples)}, enforced=enforced)
