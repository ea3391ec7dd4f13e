"""Cache hit vs miss (pure, issue 57 item 6; vLLM #33123): a cached prefix changes the prefill's GEMM shapes, so the
same prompt warm and cold may round differently and even flip a near-tied argmax with no bug. prefix_reuse compares
each cached probe's output with the same prompt sent cold to the same server, and allows the drift the reference
build shows between the two (measured on a prefix-caching server of it: hit_miss_send.py); stale KV moves far more.

A probe fails where its hit output diverges from its cold one and the reference's did not (and the cold output's
top-2 gap is above the tie gap), or where its drift before any divergence exceeds ALLOWED_FACTOR x the reference's
largest (never below RESOLUTION, the step of a float32 logprob).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.records.schema import RequestComparison
from harness.refcheck.judging.compare import is_tie_flip

ALLOWED_FACTOR = 4.0  # headroom over one measurement of the reference's hit-vs-miss drift
RESOLUTION = 2.0**-20  # a float32 logprob's step near |logprob| < 8: drift below it is rounding of the readout


@dataclass(frozen=True)
class HitMissVerdict:
    """`statement`: the drift allowed and what it was measured on (for the record's detail); `failures`: one line
    per probe that fails (empty: the hit-vs-miss judgement stands)."""

    statement: str
    failures: list[str]


def allowed_drift(noise: list[RequestComparison]) -> float:
    """The hit-vs-miss drift a probe may show: ALLOWED_FACTOR x the reference build's largest, at least RESOLUTION."""
    return max(ALLOWED_FACTOR * max((c.max_drift or 0.0 for c in noise), default=0.0), RESOLUTION)


def judge_hit_miss(candidate: list[RequestComparison], noise: list[RequestComparison], tie_gap: float,
                   measured_on: str) -> HitMissVerdict:
    """Each candidate probe (its hit output against its own cold output, compare_outputs(hit, cold)) against the
    reference build's same probe (`noise`, measured_on: where). A probe the noise lacks cannot be judged: a failure."""
    ref = {c.request: c for c in noise}
    allowed = allowed_drift(noise)
    biggest = max((c.max_drift or 0.0 for c in noise), default=0.0)
    statement = (f"hit vs miss: {len(candidate)} cached probe(s) against their cold sends, allowed drift "
                 f"{allowed:.3g} ({ALLOWED_FACTOR:g} x the reference build's largest, {biggest:.3g}, over its "
                 f"{len(noise)} probe(s) warm vs cold, {measured_on})")
    failures = []
    for c in candidate:
        where = f"hit vs miss, request {c.request}" + (f" [{c.group}]" if c.group else "")
        r = ref.get(c.request)
        if r is None:
            failures.append(f"{where}: FAIL (no data: the reference build's hit-vs-miss noise has no such probe; "
                            "measure it again for this prompt set)")
            continue
        problems = []
        if not c.exact and r.exact and not is_tie_flip(c, tie_gap):
            gap = "" if c.reference_gap_at_divergence is None else (
                f" (cold top-2 gap {c.reference_gap_at_divergence:.3g})")
            problems.append(f"the cached output's token {c.first_divergence} differs from its cold output's{gap}, "
                            "the reference build's did not")
        if c.max_drift is not None and c.max_drift > allowed:
            problems.append(f"max |delta logprob| cached vs cold {c.max_drift:.3g} > {allowed:.3g} allowed")
        if problems:
            failures.append(f"{where}: " + "; ".join(problems) + " (stale KV?)")
    return HitMissVerdict(statement, failures)


def unmeasured(reference: str, where: str, fix: str) -> str:
    """The sentence where no hit-vs-miss noise of the reference is stored."""
    return (f"hit vs miss: not measured for reference {reference!r} (nothing at {where}): the cached probes are "
            f"judged against the reference's cold outputs alone; measure it: {fix}")
