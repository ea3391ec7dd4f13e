"""The long_context grid under concurrency (pure): which cells go out together, and each burst output judged twice --
against the reference's sequential output (the grid's limits) and against the candidate's own output of the same cell
sent alone (batch invariance: no reference needed).

Bursts: at every length, all its depths at once; then mixed-length bursts of 2, 4, ... and `max_batch` requests (the
arm's max_num_seqs, capped by the grid's size), short and long cells together, drawn round-robin over the lengths so
every burst mixes them. A batch-only fault (one that needs two long sequences decoding in one step) shows here and
nowhere in the one-at-a-time grid.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.records.schema import BatchInvarianceRow, LongContextCell, RequestComparison
from harness.refcheck.compare import is_tie_flip
from harness.refcheck.long_context import ContextCell
from harness.refcheck.long_context_cells import CellLimits, CellOutput, retrieval_drop


@dataclass(frozen=True)
class Burst:
    """Cells sent at once (each cold, under a salt of the burst's own); `name` says which ("L4000 depths", "mixed
    4") in the comparisons' ids, the salt and the failures."""

    name: str
    cells: list[ContextCell]

    @property
    def where(self) -> str:
        """Where an abort says the grid stopped."""
        return f"burst {self.name}"


@dataclass(frozen=True)
class VsAlone:
    """A burst output compared with the candidate's own output of the same cell sent alone, in a burst of `batch`."""

    batch: int
    length: int  # the cell's prompt tokens
    comparison: RequestComparison  # its top-2 gap at a divergence is the candidate's own (alone)


def mixed_sizes(max_batch: int) -> list[int]:
    """2, 4, 8, ... below max_batch, then max_batch itself."""
    sizes, n = [], 2
    while n < max_batch:
        sizes.append(n)
        n *= 2
    return [*sizes, max_batch] if max_batch >= 2 else []


def round_robin(cells: list[ContextCell]) -> list[ContextCell]:
    """The cells interleaved over lengths (shortest first in each round), so any prefix mixes short and long."""
    by_length: dict[int, list[ContextCell]] = {}
    for c in cells:
        by_length.setdefault(c.length, []).append(c)
    columns = [by_length[n] for n in sorted(by_length)]
    return [col[i] for i in range(max(map(len, columns), default=0)) for col in columns if i < len(col)]


def burst_plan(cells: list[ContextCell], max_batch: int) -> list[Burst]:
    """Each length's depths together, then the mixed-length bursts."""
    plan = []
    for length in sorted({c.length for c in cells}):
        at = [c for c in cells if c.length == length]
        if len(at) >= 2:
            plan.append(Burst(f"L{length} depths", at))
    mixed = round_robin(cells)
    for n in mixed_sizes(min(max_batch, len(mixed))):
        plan.append(Burst(f"mixed {n}", mixed[:n]))
    return plan


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
