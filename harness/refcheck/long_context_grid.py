"""One candidate's long_context grid against the reference's stored outputs, as functions the suite calls in turn:
the sequential grid (cold, warm, partial, forced per cell, shortest first), the sweep's lengths, and the bursts
(cells in flight at once, against the reference and against the candidate's own output alone). Each comparison is
appended to the comparisons file as it is made, and a server death stops the grid with the reason in run.aborted:
every cell compared before it is kept.

The grid is two reference checks, each judged by its own limits and calibrated on its own comparisons: long_context
(the cells one at a time and the sweep: one comparisons file) and long_context_bursts (the bursts, against the
reference and against the candidate's output alone: a file of its own). Batch composition moves a request's drift in
ways one-at-a-time requests never show, so limits measured on those cannot judge the bursts."""

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
from harness.refcheck.long_context_cells import judge_forced, judge_generation, retrieval_drop
from harness.refcheck.prompts import CheckPrompt
from harness.refcheck.teacher_forcing import compare_forced
from harness.serve.serverlog import tail

HITS = "vllm:prefix_cache_hits_total"
BURSTS = "long_context_bursts"  # the bursts' check (harness/config/suites.py: long_context's checks)


@dataclass(frozen=True)
class CellLimits:
    """What one of the grid's checks judges its cells by: the check's drift limit and tie gap (its calibration's, or
    gates.yaml's) and gates.yaml long_context.retrieval_margin."""

    drift_limit: float
    tie_gap: float
    margin: float


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
                run: BatchRun) -> tuple[list[LongContextCell], list[str]]:
    """The sweep: one depth, cold, one request at a time, at lengths between the grid's (this run's seed draws some
    of them); each output against the reference's at the same length, counted in the long_context check beside the
    sequential cells (run.comparisons). Returns the judged cells and the failures beyond the comparisons (a retrieval
    drop). Stops at a server death (run.aborted)."""
    out_cells, extra = [], []
    for cell in cells:
        try:
            out = grid.generate(cell, cell.tokens, "sweep")
        except HarnessError as exc:
            run.aborted = abort_reason(f"sweep {cell.group}", exc, grid.live)
            break
        ref = reference[cell.id]
        c = compare_outputs(f"{cell.id}-sweep", cell.length, out, ref, f"{cell.group}, sweep")
        run.comparisons.append(c)
        grid.write(c)
        judged = judge_generation(cell, "cold", c, out.token_ids, ref.token_ids, limit, tie_gap, margin)
        out_cells.append(judged.model_copy(update={"mode": "sweep"}))
        extra += [f for f in judged.failures if f != failure_line(c, limit, tie_gap)]
    return out_cells, extra


def burst_cells(grid: Grid, plan: list[tuple[str, list[ContextCell]]], reference: dict, alone: dict, limit: float,
                tie_gap: float, margin: float,
                run: BatchRun) -> tuple[list[LongContextCell], list[tuple[int, int, RequestComparison]], list[str]]:
    """Each burst's cells in flight at once (after the sequential grid: outside every timed window); every output
    against the reference's sequential output and against the candidate's own output alone, both counted in the
    long_context_bursts check (run.comparisons). Returns the judged cells, (batch, length, comparison with the output
    alone) for the batch-invariance table, and the failures beyond the comparisons (a retrieval drop)."""
    judged, vs_alone_all, extra = [], [], []
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
            run.comparisons += [vs_ref, vs_alone]
            grid.write(vs_ref)
            grid.write(vs_alone)
            vs_alone_all.append((len(group), cell.length, vs_alone))
            out_cell = judge_burst(cell, name, len(group), vs_ref, vs_alone, out.token_ids, ref.token_ids, limit,
                                   tie_gap, margin)
            judged.append(out_cell)
            if drop := retrieval_drop(out_cell.retrieval_candidate, out_cell.retrieval_reference, margin):
                extra.append(f"request {vs_ref.request} [{cell.group}, burst {name}]: {drop}")
    return judged, vs_alone_all, extra


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
    """What one candidate's grid left: the judged cells, and per check (long_context: `run`, `extra`;
    long_context_bursts: `bursts`, `bursts_extra`, `bursts_sink`) every comparison made, why it stopped (aborted)
    and the failures beyond the comparisons; each burst output against the same cell sent alone, and the cells it
    planned. `bursts_sink` is None when the workload plans no burst: the run then records no bursts check."""

    cells: list[LongContextCell] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    run: BatchRun = field(default_factory=BatchRun)
    bursts: BatchRun = field(default_factory=BatchRun)
    bursts_extra: list[str] = field(default_factory=list)
    bursts_sink: Path | None = None
    burst_alone: list[tuple[int, int, RequestComparison]] = field(default_factory=list)
    bursts_planned: int = 0
    planned: int = 0

    sink: Path | None = None  # long_context's comparisons file

    @property
    def aborted(self) -> str | None:
        """Why the grid stopped early (its one-at-a-time part first), None when every part ran to its end."""
        return self.run.aborted or self.bursts.aborted

    def checks(self) -> list[GridCheck]:
        """The grid's reference checks, each with what it judged: long_context, and long_context_bursts where the
        workload planned bursts (compared or not: planned and not compared is no data, never left out)."""
        out = [GridCheck("long_context", self.run, self.sink, self.extra,
                         [c for c in self.cells if c.mode != "burst"])]
        if self.bursts_sink is not None:
            out.append(GridCheck(BURSTS, self.bursts, self.bursts_sink, self.bursts_extra,
                                 [c for c in self.cells if c.mode == "burst"]))
        return out


@dataclass(frozen=True)
class GridCheck:
    """One of the grid's reference checks: its name, comparisons (run.comparisons, run.aborted), comparisons file,
    failures beyond the comparisons, and the cells it judged."""

    name: str
    run: BatchRun
    sink: Path
    extra: list[str]
    cells: list[LongContextCell]


def bursts_missing(planned: int, compared: int) -> list[str]:
    """A bursts check that compared fewer burst cells than it planned has no verdict: never a PASS of what ran."""
    return [f"no data: {compared} of {planned} burst cells compared"] if compared < planned else []


def bursts_sink(sink: Path) -> Path:
    """The bursts' comparisons file beside the grid's: long_context_bursts_vs_<reference>_comparisons.jsonl."""
    return sink.with_name(sink.name.replace("long_context_", f"{BURSTS}_", 1))


def run_grid(live, sampling: Sampling, salt: str, sink: Path, w: LongContextWorkload, cells: list[ContextCell],
             sweep: list[ContextCell], reference: dict, sweep_reference: dict, caching_on: bool,
             shared: dict[int, int], block: int, sequential: CellLimits, bursts: CellLimits) -> GridRun:
    """The sequential grid, then (unless a server death stopped it) the sweep, then the bursts; comparisons appended to
    `sink` (the bursts' to a file of their own beside it) as they are made. The cells one at a time and the sweep are
    judged by `sequential` (long_context's limits), the bursts by `bursts` (long_context_bursts')."""
    arm = live.arm
    grid = Grid(live, sampling, salt, sink)
    budget = arm.server.max_num_batched_tokens if arm.parallelism.dcp > 1 else None
    limit, tie_gap, margin = sequential.drift_limit, sequential.tie_gap, sequential.margin
    out = GridRun(sink=sink)
    out.cells, out.extra, alone = sequential_cells(grid, cells, w, reference, caching_on, shared, block, limit,
                                                   tie_gap, margin, budget, out.run)
    if not out.run.aborted:
        swept, extra = sweep_cells(grid, sweep, sweep_reference, limit, tie_gap, margin, out.run)
        out.cells, out.extra = out.cells + swept, out.extra + extra
    plan = burst_plan(cells, arm.server.max_num_seqs or w.burst_max) if w.bursts else []
    out.bursts_planned = sum(len(g) for _, g in plan)
    out.planned = len(w.lengths) * len(w.depths) * (len(w.modes) + 1) + len(sweep) + out.bursts_planned
    if not plan:
        return out
    out.bursts_sink = bursts_sink(sink)
    out.bursts_sink.unlink(missing_ok=True)
    if out.run.aborted:
        out.bursts.aborted = f"not run: the grid stopped before its bursts ({out.run.aborted.splitlines()[0]})"
    else:
        judged, out.burst_alone, out.bursts_extra = burst_cells(Grid(live, sampling, salt, out.bursts_sink), plan,
                                                                reference, alone, bursts.drift_limit, bursts.tie_gap,
                                                                bursts.margin, out.bursts)
        out.cells += judged
    out.bursts_extra = bursts_missing(out.bursts_planned, len(out.burst_alone)) + out.bursts_extra
    return out
