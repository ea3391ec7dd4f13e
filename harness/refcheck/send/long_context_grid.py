"""One candidate's long_context grid against the reference's stored outputs: the executor that sends a GridPlan's
requests in order (long_context_plan: the sequential grid, the sweep, the bursts), judges each output as it arrives
and appends each comparison to its check's comparisons file as it is made. A failed request stops the grid where it
is, with the reason in the check's aborted: every cell compared before it is kept, and bursts planned after it read
"not run".

The grid is two reference checks, each judged by its own limits and calibrated on its own comparisons: long_context
(the cells one at a time and the sweep: one comparisons file) and long_context_bursts (the bursts, against the
reference and against the candidate's output alone: a file of its own). Batch composition moves a request's drift in
ways one-at-a-time requests never show, so limits measured on those cannot judge the bursts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.errors import HarnessError
from harness.measure.generation import Generation, Sampling, score_forced
from harness.measure.metrics import counter_total, fetch_metrics
from harness.records.schema import BatchInvarianceRow, LongContextCell, RequestComparison, TeacherForcedComparison
from harness.refcheck.judging.bursts import VsAlone, batch_invariance, judge_burst
from harness.refcheck.judging.check import ReferenceCheck
from harness.refcheck.judging.compare import compare_outputs
from harness.refcheck.judging.comparisons import BatchComparisons
from harness.refcheck.judging.long_context_cells import (
    CellLimits,
    CellOutput,
    judge_forced,
    judge_generation,
    retrieval_drop,
)
from harness.refcheck.judging.teacher_forcing import compare_forced
from harness.refcheck.prompts.burst_plan import Burst
from harness.refcheck.prompts.check_prompts import CheckPrompt
from harness.refcheck.prompts.long_context import ContextCell
from harness.refcheck.prompts.long_context_plan import CellRequest, GridPlan
from harness.refcheck.send.batches import abort_reason, send

HITS = "vllm:prefix_cache_hits_total"
BURSTS = "long_context_bursts"  # the bursts' check (harness/config/suites.py: long_context's checks)


@dataclass(frozen=True)
class GridLimits:
    """What the grid's two checks judge by: long_context's limits (the cells one at a time and the sweep) and
    long_context_bursts' (the bursts), each with gates.yaml long_context.retrieval_margin."""

    sequential: CellLimits
    bursts: CellLimits

    @classmethod
    def of(cls, sequential: ReferenceCheck, bursts: ReferenceCheck, margin: float) -> GridLimits:
        return cls(CellLimits(sequential, margin), CellLimits(bursts, margin))


class GridClient:
    """The candidate's side of one grid: requests (each under a cache salt of the grid's own) and /metrics."""

    def __init__(self, live, sampling: Sampling, salt: str):
        self.live, self.sampling, self.salt = live, sampling, salt

    def hits(self) -> float | None:
        return counter_total(fetch_metrics(self.live.info.base_url), HITS)

    def generate(self, cell: ContextCell, tokens: list[int], mode: str) -> Generation:
        prompt = CheckPrompt(cell.id, tokens, cell.group)
        return send(self.live, [prompt], self.sampling, cache_salt=f"{self.salt}-{mode}-{cell.id}")[0]

    def counted(self, cell: ContextCell, mode: str) -> tuple[Generation, float | None]:
        """The cell under mode's salt, with the prefix-cache hit counter's delta over it."""
        before = self.hits()
        out = self.generate(cell, cell.tokens, mode)
        after = self.hits()
        return out, (after - before if before is not None and after is not None else None)

    def burst(self, burst: Burst) -> list[Generation]:
        """The burst's cells in flight at once, cold (a salt of the burst's own)."""
        prompts = [CheckPrompt(c.id, c.tokens, c.group) for c in burst.cells]
        return send(self.live, prompts, self.sampling, cache_salt=f"{self.salt}-burst-{burst.name}")

    def forced(self, cell: ContextCell, ref_tokens: list[int]) -> Generation:
        arm = self.live.arm
        self.live.server.check_alive()
        return asyncio.run(score_forced(self.live.info.base_url, arm.model.served_name, cell.tokens, ref_tokens,
                                        arm.timeouts.request_s))

    def forced_budget(self) -> int | None:
        """The chunk budget teacher forcing's positions are reported by under DCP (teacher_forcing.compare_forced)."""
        arm = self.live.arm
        return arm.server.max_num_batched_tokens if arm.parallelism.dcp > 1 else None


@dataclass
class GridCheck:
    """One of the grid's reference checks as the executor fills it: its comparisons and why it stopped (compared),
    its comparisons file (one line per comparison), the failures beyond the comparisons (an unproven hit, a retrieval
    drop, burst cells planned and not compared) and the cells it judged."""

    name: str
    sink: Path
    limits: CellLimits
    compared: BatchComparisons = field(default_factory=BatchComparisons)
    beyond_comparisons: list[str] = field(default_factory=list)
    cells: list[LongContextCell] = field(default_factory=list)

    def add(self, comparison: RequestComparison | TeacherForcedComparison) -> None:
        self.compared.comparisons.append(comparison)
        with self.sink.open("a") as f:
            f.write(comparison.model_dump_json() + "\n")


@dataclass
class GridOutcome:
    """What one candidate's grid left: its checks (long_context; long_context_bursts, None where the workload plans no
    burst: the run then records no bursts check), the cells it planned, and each burst output against the same cell
    sent alone (the batch-invariance table)."""

    long_context: GridCheck
    bursts: GridCheck | None
    planned: int
    bursts_planned: int
    vs_alone: list[VsAlone] = field(default_factory=list)

    @property
    def cells(self) -> list[LongContextCell]:
        """Every judged cell in the order sent: the cells one at a time, the sweep, the bursts."""
        return self.long_context.cells + (self.bursts.cells if self.bursts else [])

    @property
    def aborted(self) -> str | None:
        """Why the grid stopped early (its one-at-a-time part first), None when every part ran to its end."""
        return self.long_context.compared.aborted or (self.bursts.compared.aborted if self.bursts else None)

    def checks(self) -> list[GridCheck]:
        """long_context, and long_context_bursts where the workload planned bursts (compared or not: planned and not
        compared is no data, never left out)."""
        return [self.long_context, *([self.bursts] if self.bursts else [])]

    def batch_invariance(self) -> list[BatchInvarianceRow]:
        return batch_invariance(self.vs_alone, self.bursts.limits) if self.bursts else []


def bursts_missing(planned: int, compared: int) -> list[str]:
    """A bursts check that compared fewer burst cells than it planned has no verdict: never a PASS of what ran."""
    return [f"no data: {compared} of {planned} burst cells compared"] if compared < planned else []


def bursts_sink(sink: Path) -> Path:
    """The bursts' comparisons file beside the grid's: long_context_bursts_vs_<reference>_comparisons.jsonl."""
    return sink.with_name(sink.name.replace("long_context_", f"{BURSTS}_", 1))


class GridExecutor:
    """Sends a plan's steps in order into an outcome; `reference`: the reference's cold output of every grid and
    sweep cell, by cell id."""

    def __init__(self, client: GridClient, reference: dict[str, Generation], outcome: GridOutcome):
        self.client, self.reference, self.outcome = client, reference, outcome
        self.cold_outputs: dict[str, Generation] = {}  # each cell's cold output sent alone: what a burst's must equal

    def run(self, plan: GridPlan) -> None:
        for step in plan.steps():
            check = self.outcome.long_context if isinstance(step, CellRequest) else self.outcome.bursts
            try:
                if isinstance(step, Burst):
                    self.send_burst(step, check)
                elif step.mode == "forced":
                    self.send_forced(step, check)
                else:
                    self.send_alone(step, check)
            except HarnessError as exc:
                check.compared.aborted = abort_reason(step.where, exc, self.client.live)
                break

    def send_alone(self, step: CellRequest, check: GridCheck) -> None:
        """A cold, warm, partial or sweep request, judged against the reference's cold output of its cell."""
        cell, ref = step.cell, self.reference[step.cell.id]
        if step.warmup is None:
            out, hit = self.client.generate(cell, cell.tokens, step.mode), None
        else:
            self.client.generate(cell, step.warmup, step.mode)  # fills the cache under this salt
            out, hit = self.client.counted(cell, step.mode)
        if step.mode == "cold":
            self.cold_outputs[cell.id] = out
        c = compare_outputs(step.request, cell.length, out, ref, step.group)
        check.add(c)
        judged = judge_generation(CellOutput(cell, c, out.token_ids, ref.token_ids), step.mode, check.limits, hit,
                                  step.hit_expected)
        check.cells.append(judged)
        check.beyond_comparisons += [f for f in judged.failures if f != check.limits.failure(c)]

    def send_forced(self, step: CellRequest, check: GridCheck) -> None:
        cell, ref = step.cell, self.reference[step.cell.id]
        forced = compare_forced(step.request, cell.length, self.client.forced(cell, ref.token_ids), ref, step.group,
                                self.client.forced_budget())
        check.add(forced)
        check.cells.append(judge_forced(cell, forced, check.limits))

    def send_burst(self, burst: Burst, check: GridCheck) -> None:
        """The burst's cells at once (after the sequential grid: outside every timed window); every output against
        the reference's sequential output and against the candidate's own output alone, both in the bursts' check."""
        outputs = self.client.burst(burst)
        batch = len(burst.cells)
        for cell, out in zip(burst.cells, outputs, strict=True):
            ref, where = self.reference[cell.id], f"{cell.group}, burst {burst.name}"
            vs_ref = compare_outputs(f"{cell.id}-burst-{burst.name}", cell.length, out, ref, where)
            vs_alone = compare_outputs(f"{cell.id}-burst-{burst.name}-vs-alone", cell.length, out,
                                       self.cold_outputs[cell.id], where)
            check.add(vs_ref)
            check.add(vs_alone)
            self.outcome.vs_alone.append(VsAlone(batch, cell.length, vs_alone))
            judged = judge_burst(CellOutput(cell, vs_ref, out.token_ids, ref.token_ids), vs_alone, burst.name, batch,
                                 check.limits)
            check.cells.append(judged)
            if drop := retrieval_drop(judged.retrieval_candidate, judged.retrieval_reference, check.limits.margin):
                check.beyond_comparisons.append(f"request {vs_ref.request} [{cell.group}, burst {burst.name}]: {drop}")


def run_grid(client: GridClient, plan: GridPlan, reference: dict[str, Generation], limits: GridLimits,
             sink: Path) -> GridOutcome:
    """The plan's requests in order; comparisons appended to `sink` (the bursts' to a file of their own beside it,
    bursts_sink) as they are made. The cells one at a time and the sweep are judged by limits.sequential, the bursts
    by limits.bursts."""
    bursts = GridCheck(BURSTS, bursts_sink(sink), limits.bursts) if plan.bursts else None
    outcome = GridOutcome(GridCheck("long_context", sink, limits.sequential), bursts, plan.planned,
                          plan.bursts_planned)
    sink.parent.mkdir(parents=True, exist_ok=True)
    for check in outcome.checks():
        check.sink.unlink(missing_ok=True)
    GridExecutor(client, reference, outcome).run(plan)
    if bursts is not None:
        if outcome.long_context.compared.aborted:
            stopped = outcome.long_context.compared.aborted.splitlines()[0]
            bursts.compared.aborted = f"not run: the grid stopped before its bursts ({stopped})"
        bursts.beyond_comparisons = bursts_missing(plan.bursts_planned, len(outcome.vs_alone)) \
            + bursts.beyond_comparisons
    return outcome
