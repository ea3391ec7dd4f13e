"""The long_context grid's bursts judged (pure; burst_plan.py says which cells go out together): each burst output
judged twice -- against the reference's sequential output (the grid's limits) and against the candidate's own output
of the same cell sent alone (batch invariance: no reference needed).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.records.schema import BatchInvarianceRow, LongContextCell, RequestComparison
from harness.refcheck.judging.compare import is_tie_flip
from harness.refcheck.judging.long_context_cells import CellLimits, CellOutput, retrieval_drop


@dataclass(frozen=True)
class VsAlone:
    """A burst output compared with the candidate's own output of the same cell sent alone, in a burst of `batch`."""

    batch: int
    length: int  # the cell's prompt tokens
    comparison: RequestComparison  # its top-2 gap at a divergence is the candidate's own (alone)


def judge_burst(out: CellOutput, vs_alone: RequestComparison, burst: str, batch: int,
                limits: CellLimits) -> LongContextCell:
    """A burst output: judged against the reference's sequential output like a cold cell (drift, tie gap, retrieval
    margin), and against the candidate's own output alone under the same limits: long_context_bursts' (calibrated on
    burst comparisons of both kinds), never the one-at-a-time cells'."""
    cell, vs_ref = out.cell, out.vs_reference
    acc_c, acc_r = out.copy_accuracies()
    where = f"request {vs_ref.request} [{cell.group}, burst {burst}, {batch} in flight]"
    failures = []
    if line := limits.failure(vs_ref):
        failures.append(f"{where} vs the reference: {line.split(': ', 1)[1]}")
    if line := limits.failure(vs_alone):
        own = line.split(": ", 1)[1].replace("differs from the reference", "differs from its output alone")
        failures.append(f"{where} vs its own output alone: "
                        + own.replace("the reference's top-2 gap", "its own top-2 gap alone"))
    if drop := retrieval_drop(acc_c, acc_r, limits.margin):
        failures.append(f"{where}: {drop}")
    return LongContextCell(length=cell.length, depth=cell.depth, mode="burst", exact=vs_ref.exact,
                           first_divergence=vs_ref.first_divergence, tie_flip=is_tie_flip(vs_ref, limits.tie_gap),
                           max_drift=vs_ref.max_drift, retrieval_candidate=acc_c, retrieval_reference=acc_r,
                           context_tokens=len(cell.tokens) + out.compared_tokens(), batch=batch, burst=burst,
                           alone_exact=vs_alone.exact, alone_first_divergence=vs_alone.first_divergence,
                           alone_max_drift=vs_alone.max_drift, passed=not failures, failures=failures)


def batch_invariance(compared: list[VsAlone], limits: CellLimits) -> list[BatchInvarianceRow]:
    """Per batch size, the burst outputs against the same cells sent alone."""
    rows = []
    for batch in sorted({v.batch for v in compared}):
        comps = [v.comparison for v in compared if v.batch == batch]
        divs = [c.first_divergence for c in comps if c.first_divergence is not None]
        drifts = [c.max_drift for c in comps if c.max_drift is not None]
        rows.append(BatchInvarianceRow(
            batch=batch, requests=len(comps), exact=sum(c.exact for c in comps),
            tie_flips=sum(is_tie_flip(c, limits.tie_gap) for c in comps),
            failed=sum(limits.failure(c) is not None for c in comps),
            first_divergence_min=min(divs) if divs else None, max_drift=max(drifts) if drifts else None,
            lengths=sorted({v.length for v in compared if v.batch == batch})))
    return rows
