"""Outputs across the whole context: a length x depth grid of copy prompts up to the arm's max_model_len (workload
long_context), each cell sent cold (its own cache_salt), warm (the same prompt again under one salt: a whole-prompt
prefix hit) and as a long partial hit (a warm-up sharing the cell's first blocks, then the cell), and the reference's
tokens teacher-forced on the candidate. Every output is compared with the reference arm's stored cold output; DCP bugs
are length-dependent, so the record and the assertion name the first failing length.

Cells go shortest first, one request at a time; each comparison is appended to the comparisons file as it is made, so
a server death mid-grid keeps every cell compared and the record reads aborted (the gate: FAIL, no data)."""

from __future__ import annotations

import asyncio

import pytest

from harness.config.errors import HarnessError, LaunchError
from harness.judge.long_context import long_context_gate
from harness.measure.generation import Sampling, score_forced
from harness.measure.metrics import cache_config, counter_total, fetch_metrics, label_int
from harness.pytest_plugin.floors import check_limits, with_floor
from harness.records.schema import (
    GateRecord,
    LongContextCell,
    LongContextRecord,
    ReferenceCheckRecord,
    RequestComparison,
)
from harness.refcheck.batches import BatchRun, record_fields, send
from harness.refcheck.bursts import batch_invariance, burst_plan, judge_burst
from harness.refcheck.compare import compare_outputs, failure_line
from harness.refcheck.long_context import ContextCell, expected_hit, partial_warmup, shared_tokens
from harness.refcheck.long_context_cells import (
    checked_to_tokens,
    first_failing_length,
    grid_summary,
    judge_forced,
    judge_generation,
)
from harness.refcheck.prompts import CheckPrompt
from harness.refcheck.teacher_forcing import compare_forced
from harness.serve.serverlog import tail

HITS = "vllm:prefix_cache_hits_total"


def skip_reason(session, arm_name: str, served: bool) -> str | None:
    """Read before any server starts: the grid compares a candidate with its reference; without one there is
    nothing to compare with."""
    if session.run.arm_set.reference_of(arm_name) is None:
        return f"arm {arm_name!r} names no reference arm: long_context compares a candidate with its reference"
    return None


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


def test_long_context(long_context_outputs, long_context_sweep_outputs, candidate, harness_session, record):
    arm, stored = candidate.arm, long_context_outputs
    w, prompts, sampling = harness_session.references.long_context_prompts(harness_session.candidate_name)
    gates = harness_session.thresholds()
    limits = check_limits(gates.reference_checks, arm, "long_context", stored.key, candidate.info.vllm_version,
                          harness_session.run.calibration_repeat)
    limit, margin = limits.drift_limit, gates.long_context.retrieval_margin
    info = cache_config(fetch_metrics(candidate.info.base_url))
    block = label_int(info, "block_size") or 16
    caching_on = arm.server.enable_prefix_caching is not False and info.get("enable_prefix_caching") != "False"
    try:
        shared = {n: shared_tokens(w, n, block) for n in w.lengths}
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    caching = "on" if caching_on else (f"off on arm {arm.name!r}: warm and partial requests recompute the prompt (no "
                                       "prefix-cache hit to prove); enable prefix caching to check cached KV")
    sink = harness_session.run_dir / arm.name / f"long_context_vs_{stored.arm}_comparisons.jsonl"
    sink.parent.mkdir(parents=True, exist_ok=True)
    sink.unlink(missing_ok=True)
    grid = Grid(candidate, sampling, f"long-context-{harness_session.run_id}", sink)
    budget = arm.server.max_num_batched_tokens if arm.parallelism.dcp > 1 else None
    cells: list[LongContextCell] = []
    extra: list[str] = []  # failures beyond the comparison itself: an unproven hit, a retrieval drop
    run = BatchRun()
    alone = {}  # cell id -> the candidate's cold output, sent alone: what its burst outputs must equal
    for cell in prompts.all():  # shortest first: a death at length L keeps every shorter cell
        ref = stored.outputs[cell.id]
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
                                          limits.tie_gap, margin, hit, want)
                cells.append(judged)
                extra += [f for f in judged.failures if f != failure_line(c, limit, limits.tie_gap)]
            forced = compare_forced(f"{cell.id}-forced", cell.length, grid.forced(cell, ref.token_ids), ref,
                                    cell.group, budget)
            run.comparisons.append(forced)
            grid.write(forced)
            cells.append(judge_forced(cell, forced, limit, limits.tie_gap))
        except HarnessError as exc:
            run.aborted = abort_reason(cell.group, exc, candidate)
            break
    _, sweep, _ = harness_session.references.long_context_sweep_prompts(harness_session.candidate_name)
    if not run.aborted:
        cells += sweep_cells(grid, sweep.all(), long_context_sweep_outputs.outputs, limit, limits.tie_gap, margin, run)
    plan = burst_plan(prompts.all(), arm.server.max_num_seqs or w.burst_max) if w.bursts else []
    burst_alone: list[tuple[int, int, RequestComparison]] = []
    if not run.aborted and plan:
        if "cold" not in w.modes:
            pytest.fail(f"workload {w.name!r}: bursts compare with each cell's cold output alone: add cold to modes "
                        "or set bursts: false", pytrace=False)
        bursts = Grid(candidate, sampling, grid.salt,
                      sink.with_name(f"long_context_bursts_vs_{stored.arm}_comparisons.jsonl"))
        bursts.sink.unlink(missing_ok=True)
        burst_judged, burst_alone = burst_cells(bursts, plan, stored.outputs, alone, limit, limits.tie_gap, margin,
                                                run)
        cells += burst_judged
    bursts_planned = sum(len(g) for _, g in plan)
    planned = len(w.lengths) * len(w.depths) * (len(w.modes) + 1) + len(sweep.cells) + bursts_planned
    cell_failures = [f for c in cells for f in c.failures]
    first = first_failing_length(cells)
    to = checked_to_tokens(cells)
    fields = record_fields("long_context", stored.arm, stored.key, run, limit, sink, extra,
                           limits.tie_gap)
    fields = with_floor(fields, stored, run, limits)
    floor_failure = [fields["floor"]] if fields.get("floor", "").startswith("FAIL") else []
    hits = [c.cached_tokens for c in cells if c.cached_tokens is not None]
    check = record(ReferenceCheckRecord, arm=arm.name, checked_to_tokens=to,
                   cached_tokens_proven=sum(hits) if hits else None, **fields)
    failures = cell_failures + floor_failure
    if run.aborted:
        failures.insert(0, f"aborted after {len(cells)}/{planned} cell(s): {run.aborted.splitlines()[0]}")
    summary = grid_summary(cells, planned)
    grid_rec = record(LongContextRecord, arm=arm.name, workload=w.name, reference=stored.arm,
                      reference_key=stored.key, prompts_sha=prompts.fingerprint(), needle_source=prompts.needle_source,
                      prefix_caching=caching, lengths=sorted(w.lengths), depths=list(w.depths), modes=list(w.modes),
                      cells=cells, first_failing_length=first, checked_to_tokens=to,
                      passed=not failures and check.passed, failures=failures,
                      status="aborted" if run.aborted else "complete", reason=run.aborted,
                      comparisons_path=str(sink), bursts_planned=bursts_planned,
                      sweep_lengths=sorted({c.length for c in sweep.cells}),
                      length_seed=harness_session.run.length_seed,
                      sweep_planned=len(sweep.cells),
                      batch_invariance=batch_invariance(burst_alone, limit, limits.tie_gap))
    # the live verdict, as `harness report` recomputes it from the records
    record(GateRecord, **long_context_gate(harness_session.records(), arm.name, stored.arm).record_fields())
    where = f"FIRST FAILING LENGTH {first:,} tokens; " if first is not None else ""
    seed = f"; sweep lengths of --length-seed {harness_session.run.length_seed}" if sweep.cells else ""
    assert grid_rec.passed, (f"long_context on {arm.name!r} vs {stored.arm!r} (reference {stored.path}): {where}"
                             f"{summary}{seed}; prefix caching {caching}:\n" + "\n".join(failures or check.diverged))
