"""The long_context grid as a plan (pure): every request the grid sends, in the order it sends them, before any is
sent. One executor (long_context_grid.run_grid) walks it.

The order: the sequential grid one request at a time, shortest first (a server death at length L keeps every shorter
cell), each cell in the workload's modes and then the reference's tokens teacher-forced; then the sweep (one depth,
cold, at lengths between the grid's); then the bursts (burst_plan.py: cells in flight at once). The cells one at a
time and the sweep are the long_context check; the bursts are long_context_bursts.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.cache_unit import expected_hit
from harness.config.workloads import LongContextWorkload
from harness.refcheck.prompts.burst_plan import Burst, burst_plan
from harness.refcheck.prompts.long_context import ContextCell, partial_warmup, shared_tokens


@dataclass(frozen=True)
class CellRequest:
    """One cell sent alone: `mode` cold, warm, partial, sweep (cold, at a sweep length) or forced (the reference's
    tokens teacher-forced). Warm and partial send `warmup` first under the same salt (warm: the prompt itself;
    partial: its first blocks and a suffix of its own) and read the prefix-cache hit counter around the cell."""

    cell: ContextCell
    mode: str
    warmup: list[int] | None = None
    hit_expected: int | None = None  # hit tokens the cell's request must show; None: nothing to prove (caching off)

    @property
    def request(self) -> str:
        """The comparison's id: "L4000-d0.05-warm"."""
        return f"{self.cell.id}-{self.mode}"

    @property
    def group(self) -> str:
        """The comparison's group, as failures name it."""
        return f"{self.cell.group}, sweep" if self.mode == "sweep" else self.cell.group

    @property
    def where(self) -> str:
        """Where an abort says the grid stopped."""
        return f"sweep {self.cell.group}" if self.mode == "sweep" else self.cell.group


@dataclass(frozen=True)
class GridPlan:
    """Every request of one candidate's grid, in order: `sequential` and `sweep` are long_context's, `bursts`
    long_context_bursts' (empty: the workload plans none, and the run records no bursts check)."""

    sequential: list[CellRequest]
    sweep: list[CellRequest]
    bursts: list[Burst]

    @property
    def bursts_planned(self) -> int:
        """Burst cells planned (one per cell per burst)."""
        return sum(len(b.cells) for b in self.bursts)

    @property
    def planned(self) -> int:
        """Cells planned: one per request sent alone, one per cell of a burst."""
        return len(self.sequential) + len(self.sweep) + self.bursts_planned

    def steps(self) -> list[CellRequest | Burst]:
        return [*self.sequential, *self.sweep, *self.bursts]


def cell_requests(cell: ContextCell, workload: LongContextWorkload, partial_prefix: int, caching_on: bool,
                  unit: int) -> list[CellRequest]:
    """One grid cell's requests: its modes in the workload's order, then forced. `partial_prefix`: the cell's first
    tokens the partial warm-up shares (whole prefix-cache units); `unit`: harness/config/cache_unit.py's."""
    out = []
    for mode in workload.modes:
        if mode == "cold":
            out.append(CellRequest(cell, mode))
        else:
            warmup, cached = (cell.tokens, cell.length) if mode == "warm" else \
                (partial_warmup(cell, partial_prefix, workload.seed), partial_prefix)
            out.append(CellRequest(cell, mode, warmup, expected_hit(cell.length, cached, unit) if caching_on
                                   else None))
    return [*out, CellRequest(cell, "forced")]


def plan_grid(workload: LongContextWorkload, cells: list[ContextCell], sweep: list[ContextCell], caching_on: bool,
              unit: int, max_batch: int) -> GridPlan:
    """The grid's requests for a candidate with this prefix-cache unit (cache_unit: block_size x dcp, the scheduler's
    block, never the per-rank block size: a DCP prefix hits only whole units) and prefix caching; `max_batch`: the
    most cells a burst sends (the arm's max_num_seqs, else the workload's burst_max). ConfigError where a length
    cannot share whole units with its partial warm-up (every length is checked, whichever modes run)."""
    prefix_of = {n: shared_tokens(workload, n, unit) for n in workload.lengths}
    sequential = [r for cell in cells for r in cell_requests(cell, workload, prefix_of[cell.length], caching_on, unit)]
    return GridPlan(sequential, [CellRequest(cell, "sweep") for cell in sweep],
                    burst_plan(cells, max_batch) if workload.bursts else [])
