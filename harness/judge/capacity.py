"""Capacity, pure functions of the records: which ramp levels meet the SLO, goodput, the highest level meeting it,
the throughput knee, and the gate `capacity_at_slo` (the candidate's highest level >= a factor x the reference's).

A level meets the SLO when it completed without failed requests, within the TPOT/TTFT p99 SLO, with outputs equal to
the reference's; the highest level is the top of the unbroken run from the ramp's bottom.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.thresholds import CapacityGates
from harness.judge.gates import GateResult, latest
from harness.records.meaning import of_kind
from harness.records.schema import CapacityRecord, KvCapacityRecord, Record, ReferenceCheckRecord

GATE, SUITE = "capacity_at_slo", "capacity"


def check_name(c: int) -> str:
    return f"capacity_outputs_c{c}"


@dataclass(frozen=True)
class LevelVerdict:
    concurrency: int
    meets: bool
    why: str  # what broke it, or "meets the SLO"
    goodput_rps: float | None  # requests meeting the SLO per second; None where outputs are invalid or unknown


def slo_text(limits: CapacityGates) -> str:
    return f"TPOT p99 <= {limits.slo_tpot_p99_ms:g} ms, TTFT p99 <= {limits.slo_ttft_p99_ms:g} ms"


def goodput(r: CapacityRecord, limits: CapacityGates) -> float:
    """Requests meeting both SLOs, per second of the level."""
    good = sum(1 for ttft, tpot in zip(r.ttft_samples_s, r.tpot_samples_s, strict=False)
               if ttft is not None and tpot is not None
               and ttft * 1e3 <= limits.slo_ttft_p99_ms and tpot * 1e3 <= limits.slo_tpot_p99_ms)
    return good / r.duration_s if r.duration_s > 0 else 0.0


def level_verdict(r: CapacityRecord, check: ReferenceCheckRecord | None, limits: CapacityGates,
                  needs_check: bool = True) -> LevelVerdict:
    """One level against the SLO; `needs_check`: outputs must have been compared with the reference's (the
    candidate's levels; a reference's own levels are what the comparison reads)."""
    c = r.concurrency
    broken = []
    if r.status != "complete":
        broken.append(f"{r.status}: {r.reason or 'unknown'}")
    if r.failed > limits.max_failed_requests:
        broken.append(f"{r.failed}/{r.requests} request(s) failed")
    if r.tpot.p99 is None or r.tpot.p99 * 1e3 > limits.slo_tpot_p99_ms:
        broken.append(f"TPOT p99 {ms(r.tpot.p99)} > {limits.slo_tpot_p99_ms:g} ms")
    if r.ttft.p99 is None or r.ttft.p99 * 1e3 > limits.slo_ttft_p99_ms:
        broken.append(f"TTFT p99 {ms(r.ttft.p99)} > {limits.slo_ttft_p99_ms:g} ms")
    valid = True
    if needs_check:
        if check is None:
            broken.append("outputs not compared with the reference's (no data)")
            valid = False
        elif not check.passed:
            broken.append(f"outputs invalid: {check.detail}")
            valid = False
    return LevelVerdict(c, not broken, "; ".join(broken) or "meets the SLO",
                        goodput(r, limits) if valid else None)


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.1f} ms"


def verdicts(records: list[Record], arm: str, limits: CapacityGates, needs_check: bool) -> list[LevelVerdict]:
    checks = {r.check: r for r in of_kind(records, ReferenceCheckRecord) if r.arm == arm}
    levels = sorted(latest(records, CapacityRecord, arm), key=lambda r: r.concurrency)
    return [level_verdict(r, checks.get(check_name(r.concurrency)), limits, needs_check) for r in levels]


def at_slo(levels: list[LevelVerdict]) -> int | None:
    """The highest level of the unbroken run meeting the SLO from the bottom of the ramp; None if the first fails."""
    best = None
    for v in levels:
        if not v.meets:
            break
        best = v.concurrency
    return best


def knee(levels: list[CapacityRecord], gain: float) -> int | None:
    """The last level whose throughput rose by at least `gain` over the level before (the first level when none
    did); None without throughput."""
    points = [(r.concurrency, r.output_tokens_per_s) for r in sorted(levels, key=lambda r: r.concurrency)
              if r.output_tokens_per_s]
    if not points:
        return None
    best = points[0][0]
    for (_, before), (c, now) in zip(points, points[1:], strict=False):
        if now >= (1 + gain) * before:
            best = c
        else:
            break
    return best


def kv_ratio(records: list[Record], cand: str, ref: str) -> float | None:
    mine, theirs = ((latest(records, KvCapacityRecord, a) or [None])[0] for a in (cand, ref))
    return mine.tokens / theirs.tokens if mine and theirs and theirs.tokens else None


def required_ratio(limits: CapacityGates, ratio_kv: float | None, top: int, ref_at: int) -> tuple[float, str]:
    """The factor asked of the candidate and where it comes from."""
    if limits.kv_ratio_share is None or ratio_kv is None:
        return limits.min_ratio, f"min_ratio {limits.min_ratio:g}"
    from_kv = min(limits.kv_ratio_share * ratio_kv, top / ref_at)
    if from_kv <= limits.min_ratio:
        return limits.min_ratio, f"min_ratio {limits.min_ratio:g}"
    return from_kv, (f"{limits.kv_ratio_share:g} x the KV-capacity ratio {ratio_kv:.2f}"
                     + (f", capped at the ramp's top {top} / {ref_at}" if from_kv == top / ref_at else ""))


def capacity_gate(records: list[Record], cand: str, ref: str, limits: CapacityGates) -> GateResult:
    mine = sorted(latest(records, CapacityRecord, cand), key=lambda r: r.concurrency)
    theirs = sorted(latest(records, CapacityRecord, ref), key=lambda r: r.concurrency)
    failures = [f"no data: no capacity level recorded for {a}" for a, rs in ((cand, mine), (ref, theirs)) if not rs]
    failures += [f"no data: {r.arm} c{r.concurrency} aborted: {r.reason or 'unknown'}"
                 for r in [*mine, *theirs] if r.status == "aborted"]
    if failures:
        return GateResult(GATE, SUITE, cand, ref, False, "; ".join(failures))
    cand_v = verdicts(records, cand, limits, needs_check=True)
    ref_v = verdicts(records, ref, limits, needs_check=False)
    c_at, r_at = at_slo(cand_v), at_slo(ref_v)
    numbers = {"candidate_at_slo": c_at, "reference_at_slo": r_at,
               "candidate_knee": knee(mine, limits.knee_gain), "reference_knee": knee(theirs, limits.knee_gain)}
    slo = slo_text(limits)
    if r_at is None:
        return GateResult(GATE, SUITE, cand, ref, False,
                          f"no data: {ref} meets the SLO ({slo}) at no level: c{ref_v[0].concurrency} "
                          f"{ref_v[0].why}", numbers)
    if c_at is None:
        return GateResult(GATE, SUITE, cand, ref, False,
                          f"{cand} meets the SLO ({slo}) at no level: c{cand_v[0].concurrency} {cand_v[0].why}; "
                          f"{ref} meets it up to c{r_at}", numbers)
    need, why = required_ratio(limits, kv_ratio(records, cand, ref), mine[-1].concurrency, r_at)
    numbers["required_ratio"] = need
    ratio = c_at / r_at
    above = next((v for v in cand_v if v.concurrency > c_at), None)
    stop = f" (c{above.concurrency}: {above.why})" if above else " (the top of its ramp)"
    detail = (f"at {slo}: {cand} serves c{c_at}{stop}, {ref} c{r_at}: {ratio:.2f}x, "
              f"{'>=' if ratio >= need else '<'} {need:.2f}x ({why})")
    return GateResult(GATE, SUITE, cand, ref, ratio >= need, detail, numbers)


def capacity_headline(records: list[Record], cand: str, ref: str, limits: CapacityGates) -> str | None:
    """'at TPOT p99 <= X ms, TTFT p99 <= Y ms: cand serves N concurrent requests, ref M (N/M x)', or None."""
    c_at = at_slo(verdicts(records, cand, limits, True))
    r_at = at_slo(verdicts(records, ref, limits, False))
    if c_at is None or r_at is None:
        return None
    return f"at {slo_text(limits)}: {cand} serves {c_at} concurrent requests, {ref} {r_at} ({c_at / r_at:.2f}x)"
