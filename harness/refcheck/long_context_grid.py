"""One candidate's long_context grid against the reference's stored outputs, as functions the suite calls in turn:
the sequential grid (cold, warm, partial, forced per cell, shortest first), the sweep's lengths, and the bursts
(cells in flight at once, against the reference and against the candidate's own output alone). Each comparison is
appended to the comparisons file as it is made, and a server death stops the grid with the reason in run.aborted:
every cell compared before it is kept."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.errors import HarnessError, LaunchError
from harness.config.workloads import LongContextWorkload
from harness.measure.generation import Sampling, score_forced
from harness.measure.metrics import counter_total, fetch_metrics
from harness.records.schema import LongContextCell, RequestComparison
from harness.refcheck.batches import BatchRun, send
from harness.refcheck.bursts import burst_plan, judge_burst
from harness.refcheck.compare import compare_outputs, failure_line
from harness.refcheck.long_context import ContextCell, expected_hit, partial_warmup
from harness.refcheck.long_context_cells import judge_forced, judge_generation
from harness.refcheck.prompts import CheckPrompt
from harness.refcheck.teacher_forcing import compare_forced
from harness.serve.serverlog import tail

HITS = "vllm:prefix_cache_hits_total"


class Grid:
    """The I/O of one candidate's grid: requests, /metrics, and the comparisons file (one line per comparison)."""

    def __init__(self, live, sampling: Sampling, salt: str, sink):
        self.live, self.sampling, self.salt, self.sink = live, sampling, salt, sink

    def hits(self) -> float | None:
        return counter_total(fetch_metrics(self.live.info.base_url), HITS)

    def generate(self, cell: ContextCell, tokens: list[int], mode: str):
        prompt = CheckPrompt(cell.id, tokens, cell.group)
        return send(self.live, [prompt], self.sampling, cache_salt=f"{self.salt}-{mode}-{cell.id}")[0]

    def counted(self, cell: ContextCell, mode: str):
        """The cell under mode's salt, with the prefix-cache hit counter's delta over it."""
        before = self.hits()
        out = self.generate(cell, cell.tokens, mode)
        after = self.hits()
        return out, (after - before if before is not None and after is not None else None)

    def burst(self, cells: list[ContextCell], name: str):
        """The cells in flight at once, cold (a salt of the burst's own)."""
        prompts = [CheckPrompt(c.id, c.tokens, c.group) for c in cells]
        return send(self.live, prompts, self.sampling, cache_salt=f"{self.salt}-burst-{name}")

    def forced(self, cell: ContextCell, ref_tokens: list[int]):
        arm = self.live.arm
        self.live.server.check_alive()
        return asyncio.run(score_forced(self.live.info.base_url, arm.model.served_name, cell.tokens, ref_tokens,
                                        arm.timeouts.request_s))

    def write(self, comparison) -> None:
        with self.sink.open("a") as f:
            f.write(comparison.model_dump_json() + "\n")


def abort_reason(where: str, exc: HarnessError, live) -> str:
    """Why the grid stopped: a dead server's message carries its log tail already; a failed request gets it added."""
    if isinstance(exc, LaunchError):
        return f"{where}: {exc}"
    return f"{where}: {exc}\nserver log tail:\n{tail(live.server.log_text(), 15)}"


def sweep_cells(grid: Grid, cells: list[ContextCell], reference: dict, limit: float, tie_gap: float, margin: float,
                run: BatchRun) -> list[LongContextCell]:
    """The sweep: one depth, cold, one request at a time, at lengths between the grid's (this run's seed draws some
    of them); each output against the reference's at the same length. Stops at a server death (run.aborted)."""
    out_cells = []
    for cell in cells:
        try:
            out = grid.generate(cell, cell.tokens, "sweep")
        except HarnessError as exc:
            run.aborted = abort_reason(f"sweep {cell.group}", exc, grid.live)
            break
        ref = reference[cell.id]
        c = compare_outputs(f"{cell.id}-sweep", cell.length, out, ref, f"{cell.group}, sweep")
        grid.write(c)
        judged = judge_generation(cell, "cold", c, out.token_ids, ref.token_ids, limit, tie_gap, margin)
        out_cells.append(judged.model_copy(update={"mode": "sweep"}))
    return out_cells


def burst_cells(grid: Grid, plan: list[tuple[str, list[ContextCell]]], reference: dict, alone: dict, limit: float,
                tie_gap: float, margin: float,
                run: BatchRun) -> tuple[list[LongContextCell], list[tuple[int, int, RequestComparison]]]:
    """Each burst's cells in flight at once (after the sequential grid: outside every timed window); every output
    against the reference's sequential output and against the candidate's own output alone. Returns the judged
    cells and (batch, length, comparison with the output alone) for the batch-invariance table."""
    judged, vs_alone_all = [], []
    for name, group in plan:
        try:
            outs = grid.burst(group, name)
        except HarnessError as exc:
            run.aborted = abort_reason(f"burst {name}", exc, grid.live)
            break
        for cell, out in zip(group, outs, strict=True):
            ref, where = reference[cell.id], f"{cell.group}, burst {name}"
            vs_ref = compare_outputs(f"{cell.id}-burst-{name}", cell.length, out, ref, where)
            vs_alone = compare_outputs(f"{cell.id}-burst-{name}-vs-alone", cell.length, out, alone[cell.id], where)
            grid.write(vs_ref)
            grid.write(vs_alone)
            vs_alone_all.append((len(group), cell.length, vs_alone))
            judged.append(judge_burst(cell, name, len(group), vs_ref, vs_alone, out.token_ids, ref.token_ids, limit,
                                      tie_gap, margin))
    return judged, vs_alone_all


def sequential_cells(grid: Grid, cells: list[ContextCell], w: LongContextWorkload, reference: dict,
                     caching_on: bool, shared: dict[int, int], block: int, limit: float, tie_gap: float,
                     margin: float, budget: int | None,
                     run: BatchRun) -> tuple[list[LongContextCell], list[str], dict]:
    """The grid one request at a time, shortest first (a death at length L keeps every shorter cell): each cell in
    the workload's modes, then the reference's tokens teacher-forced. Returns the judged cells, the failures beyond
    the comparisons themselves (an unproven hit, a retrieval drop) and each cell's cold output sent alone."""
    judged_cells: list[LongContextCell] = []
    extra: list[str] = []
    alone = {}
    for cell in cells:
        ref = reference[cell.id]
        try:
            for mode in w.modes:
                if mode == "cold":
                    out, hit, want = grid.generate(cell, cell.tokens, mode), None, None
                    alone[cell.id] = out
                elif mode == "warm":
                    grid.generate(cell, cell.tokens, mode)  # fills the cache under this salt
                    out, hit = grid.counted(cell, mode)
                    want = expected_hit(cell.length, cell.length, block) if caching_on else None
                else:
                    grid.generate(cell, partial_warmup(cell, shared[cell.length], w.seed), mode)
                    out, hit = grid.counted(cell, mode)
                    want = expected_hit(cell.length, shared[cell.length], block) if caching_on else None
                c = compare_outputs(f"{cell.id}-{mode}", cell.length, out, ref, cell.group)
                run.comparisons.append(c)
                grid.write(c)
                judged = judge_generation(cell, mode, c, out.token_ids, ref.token_ids, limit,
                                          tie_gap, margin, hit, want)
                judged_cells.append(judged)
                extra += [f for f in judged.failures if f != failure_line(c, limit, tie_gap)]
            forced = compare_forced(f"{cell.id}-forced", cell.length, grid.forced(cell, ref.token_ids), ref,
                                    cell.group, budget)
            run.comparisons.append(forced)
            grid.write(forced)
            judged_cells.append(judge_forced(cell, forced, limit, tie_gap))
        except HarnessError as exc:
            run.aborted = abort_reason(cell.group, exc, grid.live)
            break
    return judged_cells, extra, alone


@dataclass
class GridRun:
    """What one candidate's grid left: the judged cells, the failures beyond the comparisons, every comparison made
    (run.aborted: why it stopped), each burst output against the same cell sent alone, and the cells it planned."""

    cells: list[LongContextCell] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    run: BatchRun = field(default_factory=BatchRun)
    burst_alone: list[tuple[int, int, RequestComparison]] = field(default_factory=list)
    bursts_planned: int = 0
    planned: int = 0


def run_grid(live, sampling: Sampling, salt: str, sink: Path, w: LongContextWorkload, cells: list[ContextCell],
             sweep: list[ContextCell], reference: dict, sweep_reference: dict, caching_on: bool,
             shared: dict[int, int], block: int, limit: float, tie_gap: float, margin: float) -> GridRun:
    """The sequential grid, then (unless a server death stopped it) the sweep, then the bursts; comparisons appended to
    `sink` (the bursts' to a file of their own beside it) as they are made."""
    arm = live.arm
    grid = Grid(live, sampling, salt, sink)
    budget = arm.server.max_num_batched_tokens if arm.parallelism.dcp > 1 else None
    out = GridRun()
    out.cells, out.extra, alone = sequential_cells(grid, cells, w, reference, caching_on, shared, block, limit,
                                                   tie_gap, margin, budget, out.run)
    if not out.run.aborted:
        out.cells += sweep_cells(grid, sweep, sweep_reference, limit, tie_gap, margin, out.run)
    plan = burst_plan(cells, arm.server.max_num_seqs or w.burst_max) if w.bursts else []
    out.bursts_planned = sum(len(g) for _, g in plan)
    out.planned = len(w.lengths) * len(w.depths) * (len(w.modes) + 1) + len(sweep) + out.bursts_planned
    if not out.run.aborted and plan:
        bursts = Grid(live, sampling, salt, sink.with_name(sink.name.replace("long_context_", "long_context_bursts_")))
        bursts.sink.unlink(missing_ok=True)
        judged, out.burst_alone = burst_cells(bursts, plan, reference, alone, limit, tie_gap, margin, out.run)
        out.cells += judged
    return out
