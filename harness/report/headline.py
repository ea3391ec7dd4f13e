"""The report's headline (pure): one line per measure, candidate against reference, pair by pair: TPOT change,
KV capacity, accuracy, coverage and every check and gate. A missing measure says so; a TPOT change is quoted only on
valid outputs; the long_context line reads the same gate verdict as the table, so the two cannot disagree."""

from __future__ import annotations

from harness.judge.gates import TIMING_NOT_ENFORCED, GateResult, latest, paired_accuracy
from harness.judge.long_context import long_context_gate
from harness.judge.stats import mcnemar_exact_p, two_proportion_p
from harness.judge.validity import coverage, coverage_sentence, outputs_invalid
from harness.records.meaning import GRID_CHECKS, of_kind  # the grid's checks: its line stands for them
from harness.records.schema import (
    Gsm8kRecord,
    KvCapacityRecord,
    LongContextRecord,
    LongPrefixRecord,
    OutcomeRecord,
    Record,
    ReferenceCheckRecord,
)


def tpot_lines(records: list[Record], cand: str, ref: str, gates: list[GateResult] = ()) -> list[str]:
    """TPOT p50 per level; where the pair's gate does not enforce timing each figure says so, so a pasted -99 % is not
    read as a speed-up."""
    mine = {r.concurrency: None if r.timing_invalid else r.tpot.p50 for r in latest(records, LongPrefixRecord, cand)}
    theirs = {r.concurrency: None if r.timing_invalid else r.tpot.p50 for r in latest(records, LongPrefixRecord, ref)}
    why = {(a, r.concurrency): f" ({r.timing_invalid})" for a in (cand, ref)
           for r in latest(records, LongPrefixRecord, a) if r.timing_invalid}
    if not mine and not theirs:
        return []
    invalid = outputs_invalid(records, cand, ref) if mine else None
    if invalid:  # never a speed-up from outputs that differ from the reference's, or were never compared
        levels = ", ".join(f"c{c}" for c in sorted(mine.keys() | theirs.keys()))
        return [f"TPOT p50 {levels}: FAIL (outputs invalid: {invalid})"]
    gate = next((g for g in gates if g.arm == cand and g.gate == "long_prefix_tpot_p50"), None)
    note = f" [timing {TIMING_NOT_ENFORCED}]" if gate is not None and not gate.enforced else ""
    out = []
    for c in sorted(mine.keys() | theirs.keys()):
        a, b = mine.get(c), theirs.get(c)
        if a is None or b is None:
            who = cand if a is None else ref
            out.append(f"TPOT p50 c{c}: no data for {who}{why.get((who, c), '')}")
        else:
            out.append(f"TPOT p50 c{c}: {cand} {a * 1e3:.3f} ms vs {ref} {b * 1e3:.3f} ms ({(a - b) / b:+.1%}){note}")
    return out


def kv_line(records: list[Record], cand: str, ref: str) -> list[str]:
    mine, theirs = (latest(records, KvCapacityRecord, a) for a in (cand, ref))
    if not mine and not theirs:
        return []
    if not mine or not theirs:
        return [f"KV capacity: no data for {cand if not mine else ref}"]
    a, b = mine[-1].tokens, theirs[-1].tokens
    return [f"KV capacity: {cand} {a:,} tokens vs {ref} {b:,} tokens ({a / b:.2f}x)"]


def capacity_line(cand: str, gates: list[GateResult]) -> list[str]:
    """The capacity gate's sentence: 'at TPOT p99 <= X ms, TTFT p99 <= Y ms: cand serves cN ..., ref cM: r x'."""
    g = next((g for g in gates if g.arm == cand and g.gate == "capacity_at_slo"), None)
    if g is None:
        return []
    return [f"Capacity {'PASS' if g.passed else 'FAIL'}: {g.detail.split(chr(10))[0]}"]


def accuracy_line(records: list[Record], cand: str, ref: str, flt: str) -> list[str]:
    mine, theirs = (latest(records, Gsm8kRecord, a) for a in (cand, ref))
    if not mine and not theirs:
        return []
    if not mine or not theirs or flt not in mine[-1].scores or flt not in theirs[-1].scores:
        return [f"GSM8K {flt}: no data for {cand if not mine else ref}"]
    m, t = mine[-1], theirs[-1]
    (ka, na), (kb, nb) = (m.scores[flt].correct, m.n), (t.scores[flt].correct, t.n)
    acc_a, acc_b = (ka / na if na else 0.0), (kb / nb if nb else 0.0)
    pq_a, pq_b = (m.per_question or {}).get(flt), (t.per_question or {}).get(flt)
    if pq_a and pq_b:
        n, lost, won = paired_accuracy(pq_a, pq_b)
        test = f"exact McNemar p = {mcnemar_exact_p(lost, won):.4f}, {n} paired"
    else:
        test = f"two-proportion z p = {two_proportion_p(ka, na, kb, nb):.4f}, unpaired"
    errors = f"; {m.request_errors} request error(s)" if m.request_errors else ""
    return [f"GSM8K {flt}: {cand} {acc_a:.2%} ({ka}/{na}) vs {ref} {acc_b:.2%} ({kb}/{nb}), "
            f"{(acc_a - acc_b) * 100:+.2f} pt ({test}){errors}"]


def coverage_line(records: list[Record], cand: str, ref: str, named: bool = False) -> list[str]:
    """'Coverage: outputs checked to N tokens; timed at M tokens' (and what falls short), on every pair: a run that
    compared no output says 'outputs not checked'."""
    c = coverage(records, cand, ref)
    return [f"Coverage{' ' + cand if named else ''}: {coverage_sentence(c)}"]


def judged_note(r: ReferenceCheckRecord) -> str:
    """'calibrated ...' or 'not calibrated' from the check's judged_by, or nothing (records before it existed)."""
    if r.judged_by and r.judged_by.startswith("calibrated"):
        return r.judged_by
    return "not calibrated" if r.judged_by and "not calibrated" in r.judged_by else ""


def failing_cells(grid: LongContextRecord, most: int = 4) -> str:
    """'burst at 4,000 tokens x6, sweep at 2,713 tokens x1': the failing cells by mode and length, shortest first."""
    groups: dict[tuple[int, str], int] = {}
    for c in grid.cells:
        if not c.passed:
            groups[(c.length, c.mode)] = groups.get((c.length, c.mode), 0) + 1
    parts = [f"{mode} at {length:,} tokens x{n}" for (length, mode), n in sorted(groups.items())]
    return ", ".join(parts[:most]) + (f" (+{len(parts) - most} more)" if len(parts) > most else "")


def grid_line(records: list[Record], cand: str, ref: str, who: str) -> list[str]:
    """The long_context grid as one check: every cell it judged, counted by kind, and the long_context_outputs
    gate's verdict (the same function on the same records), the failing cells named, each part's calibration."""
    grid = next((r for r in reversed(of_kind(records, LongContextRecord)) if r.arm == cand and r.reference == ref),
                None)
    if grid is None:
        return []
    gate = long_context_gate(records, cand, ref)
    verdict = "aborted" if grid.status == "aborted" else ("PASS" if gate.passed else "FAIL")
    kinds: dict[str, list] = {"sequential": [], "sweep": [], "burst": []}
    for c in grid.cells:
        kinds[c.mode if c.mode in ("sweep", "burst") else "sequential"].append(c)
    counted = ", ".join(f"{k} {sum(c.passed for c in cs)}/{len(cs)}" for k, cs in kinds.items() if cs)
    text = (f"{sum(c.passed for c in grid.cells)}/{len(grid.cells)} cells pass, {sum(c.exact for c in grid.cells)} "
            f"exact: {counted}" if grid.cells else "no cell compared")
    if failing := failing_cells(grid):
        text += f"; failing: {failing}"
    parts = {r.check: r for r in of_kind(records, ReferenceCheckRecord) if r.arm == cand
             and r.reference == ref and r.check in GRID_CHECKS}  # the latest of each
    text += "".join(f"; {check} vs its floor: FAIL" for check, r in parts.items() if "FAIL" in (r.floor or ""))
    text += "".join(f"; {check} {note}" for check, r in parts.items() if (note := judged_note(r)))
    if not gate.passed and verdict == "FAIL" and not failing:  # failed without a failing cell: say why
        text += f"; {gate.detail.splitlines()[0][:200]}"
    return [f"Check long_context {who}vs {ref}: {verdict} ({text})"]


def check_lines(records: list[Record], cand: str, gates: list[GateResult], named: bool = False,
                ref: str | None = None) -> list[str]:
    """Each reference check and gate of the candidate; `named`: the line says whose (a run of several). The
    long_context grid against `ref` is one line for every cell it judged (grid_line), standing for its checks."""
    who = f"{cand} " if named else ""
    out = grid_line(records, cand, ref, who) if ref else []
    folded = GRID_CHECKS if out else ()
    for r in (r for r in of_kind(records, ReferenceCheckRecord) if r.arm == cand
              and not (r.check in folded and r.reference == ref)):
        verdict = "aborted" if r.status == "aborted" else ("PASS" if r.passed else "FAIL")
        judged = f"; {note}" if (note := judged_note(r)) else ""
        out.append(f"Check {r.check} {who}vs {r.reference}: {verdict} ({r.exact_matches}/{r.requests} exact{judged})")
    out += [f"Gate {g.gate}{' ' + cand if named else ''}: {'PASS' if g.passed else 'FAIL'}"
            + (f" ({g.detail})" if not g.passed else f" (no signal: {g.no_signal})" if g.no_signal
               else f" ({g.power})" if g.power else "")
            for g in gates if g.arm == cand]
    return out


def headline(records: list[Record], pairs: list[tuple[str, str | None]], gates: list[GateResult],
             flt: str = "strict-match") -> list[str]:
    """The headline lines, pair by pair (candidate against its reference); nothing for a candidate without one."""
    named = len(pairs) > 1
    out = []
    for cand, ref in pairs:
        if ref is None:
            continue
        out += [*tpot_lines(records, cand, ref, gates), *kv_line(records, cand, ref), *capacity_line(cand, gates),
                *accuracy_line(records, cand, ref, flt),
                *coverage_line(records, cand, ref, named), *check_lines(records, cand, gates, named, ref)]
    return out


def candidate_verdicts(records: list[Record], pairs: list[tuple[str, str | None]],
                       gates: list[GateResult]) -> list[str]:
    """One line per candidate of a run of several (pure): PASSED, or FAILED with what failed -- its own tests and
    enforced gates, and its reference's tests (a failed reference leaves nothing to compare with)."""
    failed = {}  # arm -> its failed tests, in order
    for r in of_kind(records, OutcomeRecord):
        if r.outcome in ("failed", "error"):
            failed.setdefault(r.arm, []).append(r.test.split("::")[-1])
    out = []
    for cand, ref in pairs:
        why = [*failed.get(cand, []), *(f"gate {g.gate}" for g in gates if g.arm == cand and not g.passed
                                        and g.enforced)]
        if ref and failed.get(ref):
            why.append(f"reference {ref}: {', '.join(failed[ref])}")
        versus = f" vs {ref}" if ref else ""
        out.append(f"{cand}{versus}: " + (f"FAILED ({'; '.join(why)})" if why else "PASSED"))
    return out
