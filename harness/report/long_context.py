"""The long_context grid for the report (pure): a length x depth table (Markdown) and the heatmap's data, candidate
beside reference, naming the first failing length. A grid that is missing cells or stopped early says so in the
cells it lacks ("no data") and in its verdict column (FAIL), never a PASS."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.records.meaning import of_kind
from harness.records.schema import LongContextCell, LongContextRecord, Record

GENERATION_MODES = ("cold", "warm", "partial")


def latest_grids(records: list[Record]) -> list[LongContextRecord]:
    """Each candidate's latest grid (a resumed test's later record replaces the earlier), in first-seen order."""
    by_arm: dict[str, LongContextRecord] = {}
    for r in of_kind(records, LongContextRecord):
        by_arm[r.arm] = r
    return list(by_arm.values())


def cells_at(r: LongContextRecord, length: int, depth: float) -> list[LongContextCell]:
    return [c for c in r.cells if c.length == length and c.depth == depth]


def sequential(cells: list[LongContextCell]) -> list[LongContextCell]:
    """The grid's own cells, one request at a time (a burst cell is an extra look at one of them)."""
    return [c for c in cells if c.mode != "burst"]


def counts(cells: list[LongContextCell]) -> str:
    """'12 exact / 0 tie / 0 fail' of some cells; '-' when there are none."""
    if not cells:
        return "-"
    fail = sum(not c.passed for c in cells)
    tie = sum(c.tie_flip and c.passed for c in cells)
    return f"{sum(c.exact for c in cells)} exact / {tie} tie / {fail} fail"


def expected_modes(r: LongContextRecord) -> int:
    return len(r.modes) + 1  # + the teacher-forced row


def retrieval(cells: list[LongContextCell]) -> tuple[float | None, float | None]:
    """(the candidate's lowest copy accuracy over the generation modes, the reference's)."""
    cand = [c.retrieval_candidate for c in cells if c.retrieval_candidate is not None]
    ref = [c.retrieval_reference for c in cells if c.retrieval_reference is not None]
    return (min(cand) if cand else None), (ref[0] if ref else None)


def cell_text(r: LongContextRecord, cells: list[LongContextCell]) -> str:
    """'PASS, copy 1.00 vs 1.00' / 'FAIL warm, forced (from token 3), copy 0.12 vs 1.00' / 'no data (...)'."""
    if len(sequential(cells)) < expected_modes(r):
        return f"no data ({len(sequential(cells))}/{expected_modes(r)} modes compared)"
    cand, ref = retrieval(cells)
    copy = "" if cand is None else f", copy {cand:.2f} vs {ref:.2f}"
    failed = [c for c in cells if not c.passed]
    if not failed:
        return "PASS" + copy
    tokens = [c.first_divergence for c in failed if c.first_divergence is not None]
    start = f" (from token {min(tokens)})" if tokens else ""
    return f"FAIL {', '.join(dict.fromkeys(c.mode for c in failed))}{start}{copy}"


def length_verdict(r: LongContextRecord, length: int) -> str:
    cells = [c for c in r.cells if c.length == length]
    if len(sequential(cells)) < len(r.depths) * expected_modes(r):
        why = "aborted before it" if r.status == "aborted" else "cells missing"
        return f"FAIL (no data: {why})"
    if all(c.passed for c in cells):
        return "PASS"
    return "FAIL (first failing length)" if length == r.first_failing_length else "FAIL"


def long_context_table(records: list[Record]) -> pd.DataFrame:
    """One row per candidate and prompt length, one column per needle depth; the candidate's copy accuracy beside
    the reference's on the same prompt, and which modes diverged at which generated token."""
    rows = []
    for r in latest_grids(records):
        for length in r.lengths:
            row = {"Arm vs reference": f"{r.arm} vs {r.reference}", "Length": f"{length:,}"}
            row.update({f"depth {d:g}": cell_text(r, cells_at(r, length, d)) for d in r.depths})
            at = [c for c in r.cells if c.length == length]
            row["Sequential"] = counts(sequential(at))
            row["Burst"] = counts([c for c in at if c.mode == "burst"]) if r.bursts_planned else "not run"
            row["Verdict"] = length_verdict(r, length)
            rows.append(row)
        if r.sweep_planned:
            rows.append(sweep_row(r))
        if r.status == "aborted":
            rows.append({"Arm vs reference": f"{r.arm} vs {r.reference}", "Length": "all",
                         "Verdict": f"FAIL (no data: aborted: {(r.reason or '').strip().splitlines()[0][:160]})"})
    return pd.DataFrame(rows).fillna("") if rows else pd.DataFrame()


def sweep_row(r: LongContextRecord) -> dict:
    """The sweep's lengths in one row: how many, their span, the seed that drew the jittered ones, the counts and the
    first failing sweep length."""
    cells = [c for c in r.cells if c.mode == "sweep"]
    lengths = r.sweep_lengths
    failing = sorted({c.length for c in cells if not c.passed})
    if len(cells) < r.sweep_planned:
        verdict = f"FAIL (no data: {len(cells)}/{r.sweep_planned} sweep lengths compared)"
    elif failing:
        verdict = f"FAIL (from {failing[0]:,}" + (", the first failing length)" if failing[0] == r.first_failing_length
                                                  else ")")
    else:
        verdict = "PASS"
    return {"Arm vs reference": f"{r.arm} vs {r.reference}",
            "Length": f"sweep: {len(lengths)} lengths {min(lengths):,}..{max(lengths):,} (seed {r.length_seed})"
            if lengths else "sweep", "Sequential": counts(cells), "Burst": "-", "Verdict": verdict}


def batch_invariance_table(records: list[Record]) -> pd.DataFrame:
    """Per candidate and batch size: its burst outputs against the same cells sent alone (no reference needed)."""
    rows = []
    for r in latest_grids(records):
        for b in r.batch_invariance:
            rows.append({"Arm": r.arm, "Batch": b.batch, "Lengths": ", ".join(f"{n:,}" for n in b.lengths),
                         "Exact vs alone": f"{b.exact}/{b.requests}", "Tie flips": b.tie_flips, "Failed": b.failed,
                         "First divergence": "-" if b.first_divergence_min is None else b.first_divergence_min,
                         "Max drift": "-" if b.max_drift is None else f"{b.max_drift:.3g}",
                         "Verdict": "PASS" if b.failed == 0 and b.requests else
                         "FAIL (no data)" if not b.requests else "FAIL"})
        if r.bursts_planned and not r.batch_invariance:
            rows.append({"Arm": r.arm, "Verdict": f"FAIL (no data: {r.bursts_planned} burst cells planned, none "
                                                  "compared)"})
    return pd.DataFrame(rows).fillna("") if rows else pd.DataFrame()


@dataclass(frozen=True)
class Heatmap:
    """One candidate's grid as the heatmap draws it: rows = lengths, columns = depths."""

    title: str
    lengths: list[int]
    depths: list[float]
    candidate: list[list[float | None]]  # copy accuracy (lowest over the generation modes); None: no data
    reference: list[list[float | None]]
    status: list[list[str]]  # "pass", "fail" or "missing" per cell (every mode, teacher forcing included)
    labels: list[list[str]]  # the candidate cell's text: which modes failed


def heatmaps(records: list[Record]) -> list[Heatmap]:
    out = []
    for r in latest_grids(records):
        cand, ref, status, labels = [], [], [], []
        for length in r.lengths:
            row_c, row_r, row_s, row_l = [], [], [], []
            for d in r.depths:
                cells = cells_at(r, length, d)
                a, b = retrieval(cells)
                failed = [c.mode for c in cells if not c.passed]
                missing = len(cells) < expected_modes(r)
                row_c.append(a)
                row_r.append(b)
                row_s.append("missing" if missing else "fail" if failed else "pass")
                row_l.append("no data" if missing else ("FAIL\n" + ",".join(failed)) if failed else "ok")
            cand.append(row_c)
            ref.append(row_r)
            status.append(row_s)
            labels.append(row_l)
        first = (f"first failing length {r.first_failing_length:,}" if r.first_failing_length is not None
                 else "no failing length")
        state = "" if r.status == "complete" else " (aborted: no data past the last cell)"
        out.append(Heatmap(f"{r.arm} vs {r.reference}: {first}{state}", list(r.lengths), list(r.depths), cand, ref,
                           status, labels))
    return out
