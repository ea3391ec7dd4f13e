"""The long_context gate (pure): the candidate's grid record, judged complete or not, naming the first failing length.

The suite judges every cell as it runs (harness/refcheck/judging/long_context_cells.py) and records the grid; this gate
reads that record back, so the report recomputes the verdict from results.jsonl alone. A missing record, an aborted
grid or a grid with cells missing is FAIL (no data: ...), never a PASS.
"""

from __future__ import annotations

from harness.judge.gates import GateResult, latest
from harness.records.schema import LongContextRecord, Record

GATE = "long_context_outputs"


def planned_cells(r: LongContextRecord) -> int:
    """Cells of the whole grid: every length x depth in each generation mode, plus one teacher-forced each, plus the
    sweep and burst cells it planned."""
    return len(r.lengths) * len(r.depths) * (len(r.modes) + 1) + r.sweep_planned + r.bursts_planned


def long_context_gaps(r: LongContextRecord | None, cand: str) -> list[str]:
    if r is None:
        return [f"no data: no long_context record for {cand}"]
    if r.status == "aborted":
        why = (r.reason or "no reason recorded").strip().splitlines()[0]
        first = f"; first failing length {r.first_failing_length:,} before it stopped" if r.first_failing_length else ""
        return [f"no data: {cand} long_context aborted after {len(r.cells)}/{planned_cells(r)} cell(s): {why}{first}"]
    if len(r.cells) < planned_cells(r):
        return [f"no data: {cand} long_context compared {len(r.cells)} of {planned_cells(r)} cells"]
    return []


def long_context_gate(records: list[Record], cand: str, ref: str) -> GateResult:
    mine = (latest(records, LongContextRecord, cand) or [None])[-1]
    failures = long_context_gaps(mine, cand)
    numbers: dict[str, float | int | None] = {}
    if mine is not None:
        numbers = {"cells": len(mine.cells), "failed_cells": sum(not c.passed for c in mine.cells),
                   "first_failing_length": mine.first_failing_length, "checked_to_tokens": mine.checked_to_tokens}
    if not failures and mine.reference != ref:
        failures.append(f"no data: {cand}'s long_context record compares with {mine.reference}, not {ref}")
    if not failures and not mine.passed:
        first = mine.first_failing_length
        lead = f"first failing length {first:,} tokens" if first is not None else "the grid failed"
        failures.append(f"{lead}: " + "; ".join(mine.failures[:3])
                        + (f" (+{len(mine.failures) - 3} more)" if len(mine.failures) > 3 else ""))
    if failures:
        detail = "; ".join(failures)
    else:
        to = f", outputs checked to {mine.checked_to_tokens:,} tokens" if mine.checked_to_tokens else ""
        more = {m: sum(c.mode == m for c in mine.cells) for m in ("sweep", "burst")}
        extra = "".join(f", {n} {m}" for m, n in more.items() if n)  # every cell counted, not only the grid's
        detail = (f"{len(mine.cells)} cells of {len(mine.lengths)} lengths (to {max(mine.lengths):,}) x "
                  f"{len(mine.depths)} depths x {'/'.join(mine.modes)}/forced{extra} equal {ref}'s{to}")
    return GateResult(GATE, "long_context", cand, ref, not failures, detail, numbers)
