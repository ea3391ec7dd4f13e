"""Candidate-vs-reference gates as pure functions of the records in results.jsonl.

The comparison tests in suites/ call these on the records read back from the run's results file; `harness report`
calls the same functions on the same file, so a gate can be recomputed anywhere, later, from the file alone.
A gate whose input is missing, failed or partial is FAIL, and its detail says "no data: ..." and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.config.thresholds import CoverageGates, LongPrefixGates
from harness.judge.validity import coverage, coverage_sentence, outputs_invalid
from harness.records.meaning import of_kind
from harness.records.runinfo import concurrency_levels
from harness.records.schema import GateRecord, LongPrefixRecord, Record


@dataclass(frozen=True)
class GateResult:
    gate: str
    suite: str
    arm: str
    reference: str
    passed: bool
    detail: str
    numbers: dict[str, float | int | None] = field(default_factory=dict)
    enforced: bool = True  # False: computed and recorded, but a failure does not fail the run (gates.yaml)
    no_signal: str | None = None  # why a passing gate could not have failed on its data: "PASS (no signal: ...)"
    power: str | None = None  # the smallest fault the gate could catch on its data, stated in the headline

    def record_fields(self) -> dict:
        """The fields of the GateRecord a comparison test writes (the live verdict)."""
        return {"arm": self.arm, "gate": self.gate, "reference": self.reference, "passed": self.passed,
                "detail": self.detail, "numbers": self.numbers}

    @classmethod
    def from_record(cls, r: GateRecord) -> GateResult:
        return cls(r.gate, r.suite, r.arm, r.reference, r.passed, r.detail, dict(r.numbers))


def latest(records: list[Record], kind: type, arm: str) -> list:
    """An arm's records of one kind; a relaunched or resumed arm's later record replaces the earlier one."""
    by_key: dict = {}
    for r in of_kind(records, kind):
        if r.arm == arm:
            by_key[getattr(r, "concurrency", None)] = r
    return list(by_key.values())


def tpot_regression(arm: str, ref: str, conc: int, cand_p50: float, ref_p50: float, tolerance: float) -> str | None:
    limit = ref_p50 * (1 + tolerance)
    if cand_p50 > limit:
        return (f"c{conc}: {arm} TPOT p50 {cand_p50 * 1e3:.3f} ms > {ref} {ref_p50 * 1e3:.3f} ms x "
                f"(1 + {tolerance:g}) = {limit * 1e3:.3f} ms")
    return None


def long_prefix_gaps(arm: str, levels: dict[int, LongPrefixRecord], wanted: set[int], max_failed: int) -> list[str]:
    """Why one arm's long-prefix records cannot be judged: missing, aborted or failed levels."""
    if not levels:
        return [f"no data: no long_prefix record for {arm}"]
    out = []
    for c in sorted(wanted):
        r = levels.get(c)
        if r is None:
            out.append(f"no data: {arm} has no c{c} level")
        elif r.status == "aborted":
            out.append(f"no data: {arm} c{c} aborted after {r.requests} request(s)")
        elif r.failed > max_failed:
            out.append(f"no data: {arm} c{c}: {r.failed}/{r.requests} request(s) failed (at most {max_failed})")
        elif r.tpot.p50 is None and not r.timing_invalid:  # a buffered level: timing_gaps says why
            out.append(f"no data: {arm} c{c} has no TPOT p50")
    return out


def timing_gaps(arm: str, levels: dict[int, LongPrefixRecord], wanted: set[int]) -> list[str]:
    """The levels whose streams arrived buffered: nothing is missing, but their TPOT is not a timing."""
    return [f"no data: {arm} c{c}: {levels[c].timing_invalid}" for c in sorted(wanted)
            if c in levels and levels[c].timing_invalid]


TIMING_NOT_ENFORCED = "not enforced for this arm: gates.yaml enforce_timing false"  # the gate's detail, the headline


def tpot_gate(records: list[Record], cand: str, ref: str, limits: LongPrefixGates,
              levels: Iterable[int] = ()) -> GateResult:
    """Candidate TPOT p50 <= reference TPOT p50 x (1 + tolerance) at every planned or recorded level, with valid
    outputs only (else FAIL "outputs invalid", enforced always); a buffered level FAILs "no data", enforced only where
    timing is."""
    mine = {r.concurrency: r for r in latest(records, LongPrefixRecord, cand)}
    theirs = {r.concurrency: r for r in latest(records, LongPrefixRecord, ref)}
    wanted = set(levels) | set(mine) | set(theirs)
    failures = [*long_prefix_gaps(cand, mine, wanted, limits.max_failed_requests),
                *long_prefix_gaps(ref, theirs, wanted, limits.max_failed_requests)]
    if not failures and len({r.prompts_sha for r in (*mine.values(), *theirs.values())}) > 1:
        failures.append("the two arms were sent different prompts (prompts_sha differs)")
    invalid = outputs_invalid(records, cand, ref) if mine else None  # no timing at all: the no-data line says so
    if invalid:  # after the timing's own no-data lines: with whole timing, the detail opens with it
        failures.append(f"outputs invalid: {invalid}")
    numbers: dict[str, float | int | None] = {}
    no_data = bool(failures)  # missing or partial input, or invalid outputs, fails whether or not timing is enforced
    failures += [*timing_gaps(cand, mine, wanted), *timing_gaps(ref, theirs, wanted)]
    if not failures:
        tol = limits.tpot_p50_tolerance
        for c in sorted(wanted):
            numbers[f"c{c}_ratio"] = mine[c].tpot.p50 / theirs[c].tpot.p50
            failures.append(tpot_regression(cand, ref, c, mine[c].tpot.p50, theirs[c].tpot.p50, tol))
        failures = [f for f in failures if f]
    enforced = limits.enforce_timing or no_data
    detail = "; ".join(failures) or f"TPOT p50 within {limits.tpot_p50_tolerance:g} of {ref} at every concurrency"
    if failures and not enforced:
        detail += f" ({TIMING_NOT_ENFORCED})"
    return GateResult("long_prefix_tpot_p50", "long_prefix", cand, ref, not failures, detail, numbers, enforced)


def coverage_gate(records: list[Record], cand: str, ref: str, limits: CoverageGates) -> GateResult:
    """gates.yaml coverage.require_checked_to_timed: the longest context any output check of the candidate reached
    must be at least the longest context the run timed; nothing checked, or lengths not recorded, is no data."""
    c = coverage(records, cand, ref)
    sentence = coverage_sentence(c)
    if not c.timed or c.timed_to is None or c.checked_to is None:
        passed, detail = False, f"no data: {sentence}"
    else:
        passed, detail = not c.short, sentence
    return GateResult("coverage_checked_to_timed", "long_prefix", cand, ref, passed, detail,
                      {"checked_to_tokens": c.checked_to, "timed_to_tokens": c.timed_to},
                      limits.require_checked_to_timed)


def long_prefix_gates(records: list[Record], cand: str, ref: str, limits: LongPrefixGates, coverage: CoverageGates,
                      workloads=None) -> list[GateResult]:
    """The TPOT gate (a LevelTimingGate, harness/config/suites.py), and the coverage gate where gates.yaml asks for
    it; the levels the workload planned from the pair's workloads as run.json recorded them."""
    out = [tpot_gate(records, cand, ref, limits, concurrency_levels(workloads))]
    if coverage.require_checked_to_timed:
        out.append(coverage_gate(records, cand, ref, coverage))
    return out


def paired_accuracy(cand: dict[int, bool], ref: dict[int, bool]) -> tuple[int, int, int]:
    """(questions in both, b = only the reference right, c = only the candidate right)."""
    common = cand.keys() & ref.keys()
    b = sum(1 for q in common if ref[q] and not cand[q])
    c = sum(1 for q in common if cand[q] and not ref[q])
    return len(common), b, c
