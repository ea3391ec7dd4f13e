"""What a run is missing, and why (pure): a partial run renders what it has and lists the rest here."""

from __future__ import annotations

from harness.records.manifest import RunManifest, interruption
from harness.records.meaning import meaning, of_kind
from harness.records.runinfo import concurrency_levels
from harness.records.schema import LongPrefixRecord, OutcomeRecord, Record, ServerRecord
from harness.report.tables import first_line, skip_why


def missing_outcomes(records: list[Record], arms: list[str], suites: list[str],
                     per_arm: list[str] | None = None, candidates: list[str] | None = None) -> list[str]:
    """One line per expected suite x arm with no test outcome, saying why when the records know. Suites not in
    `per_arm` run for the candidates (default: arms[0]) only; None (older run.json) expects every arm everywhere."""
    have = {(r.suite, r.arm) for r in of_kind(records, OutcomeRecord)}
    failed = {r.arm: r.reason for r in of_kind(records, ServerRecord) if r.status == "failed"}
    candidates = candidates if candidates is not None else arms[:1]
    out = []
    for suite in suites:
        for arm in (arms if per_arm is None or suite in per_arm else candidates):
            if (suite, arm) in have:
                continue
            why = (f"the server failed: {first_line(failed[arm])}" if arm in failed
                   else "no record: not run (the run stopped before it, or the suite was not selected)")
            out.append(f"{suite} x {arm}: {why}")
    return out


def missing_levels(records: list[Record], arms: list[str], concurrency: dict[str, list[int]]) -> list[str]:
    """Concurrency levels of its long-prefix workload (`concurrency`: per arm) an arm never recorded (only for arms
    that ran it)."""
    got: dict[str, set[int]] = {}
    for r in of_kind(records, LongPrefixRecord):
        got.setdefault(r.arm, set()).add(r.concurrency)
    return [f"long_prefix x {arm}: c{c} not measured (an earlier level aborted or the run stopped)"
            for arm in arms if arm in got for c in concurrency.get(arm, []) if c not in got[arm]]


def levels_per_arm(manifest: RunManifest | None, arms: list[str]) -> dict[str, list[int]]:
    """Each arm's long-prefix levels: its pair's recorded workloads (a reference runs its candidate's), else the
    run's top-level workloads."""
    if manifest is None:
        return {arm: [] for arm in arms}
    default = concurrency_levels(manifest.workloads)
    own = {arm: concurrency_levels(manifest.workloads_of(p)) for p in manifest.pairs
           for arm in (p.candidate, p.reference) if arm}
    return {arm: own.get(arm) or default for arm in arms}


def unfinished_outcomes(records: list[Record]) -> list[str]:
    """One line per suite x arm with a skipped or errored test, however many of its tests say so (spec_decode skips
    its per-arm test and its comparison, both recorded for the candidate): each distinct reason once, in order."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for r in of_kind(records, OutcomeRecord):
        if r.outcome not in ("skipped", "error"):
            continue
        if r.outcome == "skipped":
            why = f"skipped: {first_line(skip_why(r.message), 200)}"
        else:
            last = r.message.strip().splitlines()[-1] if r.message.strip() else "no message"
            why = f"error: {first_line(last, 200)}"
        seen = reasons.setdefault((r.suite, r.arm), [])
        if why not in seen:
            seen.append(why)
    return [f"{suite} x {arm}: {'; '.join(whys)}" for (suite, arm), whys in reasons.items()]


def aborted(records: list[Record]) -> list[str]:
    """Each record's own account of what did not finish (its kind's declaration, harness/records/meaning.py), then
    the tests skipped or errored."""
    lines = [f"{u.where}: {u.what}{first_line(u.text, 200)}"
             for r in records for u in meaning(r).unfinished(r)]
    return lines + unfinished_outcomes(records)


def gaps(manifest: RunManifest | None, records: list[Record], arms: list[str],
         candidates: list[str] | None = None) -> list[str]:
    """Everything missing from a run, each with its reason; empty for a complete run. `candidates`: the run's
    (default: the first arm)."""
    m = manifest or RunManifest()
    suites = m.suites or sorted({r.suite for r in of_kind(records, OutcomeRecord)})
    # Suites are expected of the run's arms only: an eager variant launched to capture outputs runs none.
    arms = [a for a in arms if a in m.arms] if m.arms else arms
    return [*interruption(manifest), *missing_outcomes(records, arms, suites, m.per_arm_suites, candidates),
            *missing_levels(records, arms, levels_per_arm(manifest, arms)), *aborted(records)]
