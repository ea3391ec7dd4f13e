"""Outputs across the whole context: a length x depth grid of copy prompts up to the arm's max_model_len (workload
long_context), each cell sent cold (its own cache_salt), warm (the same prompt again under one salt: a whole-prompt
prefix hit) and as a long partial hit (a warm-up sharing the cell's first blocks, then the cell), and the reference's
tokens teacher-forced on the candidate. Every output is compared with the reference arm's stored cold output; DCP bugs
are length-dependent, so the record and the assertion name the first failing length.

Cells go shortest first, one request at a time; each comparison is appended to the comparisons file as it is made, so
a server death mid-grid keeps every cell compared and the record reads aborted (the gate: FAIL, no data).

The grid records two reference checks, each judged by its own limits and floor (its calibration's, or gates.yaml's):
long_context (the cells one at a time and the sweep) and long_context_bursts (the bursts, where the workload plans
any), so `harness calibrate` measures the bursts' spread apart from the one-at-a-time requests'."""

from __future__ import annotations

import pytest

from harness.config.cache_unit import cache_unit
from harness.config.errors import HarnessError
from harness.config.suites import BY_NAME
from harness.judge.catalogue_gate import catalogue_gates
from harness.measure.metrics import cache_config, fetch_metrics, label_int, prefix_caching_on
from harness.records.schema import GateRecord, LongContextRecord, ReferenceCheckRecord
from harness.refcheck.judging.comparisons import record_fields
from harness.refcheck.judging.long_context_cells import checked_to_tokens, first_failing_length, grid_summary
from harness.refcheck.prompt_sets.long_context_set import LONG_CONTEXT, LONG_CONTEXT_SWEEP
from harness.refcheck.prompts.long_context_plan import plan_grid
from harness.refcheck.send.long_context_grid import BURSTS, GridClient, GridLimits, run_grid


def skip_reason(session, under_test, served: bool) -> str | None:
    """Read before any server starts: the grid compares a candidate with its reference; without one there is
    nothing to compare with."""
    if session.reference_of(under_test.arm) is None:
        return f"arm {under_test.arm!r} names no reference arm: long_context compares a candidate with its reference"
    return None


def test_long_context(long_context_outputs, long_context_sweep_outputs, candidate, harness_session, under_test,
                      record):
    arm, stored, session = candidate.arm, long_context_outputs, harness_session
    workload, prompts, sampling = under_test.prompt_set(LONG_CONTEXT)
    _, sweep, _ = under_test.prompt_set(LONG_CONTEXT_SWEEP)
    gates = under_test.thresholds()
    limits, burst_limits = (under_test.reference_check(name, stored.noise_key) for name in ("long_context", BURSTS))
    info = cache_config(fetch_metrics(candidate.info.base_url))
    block = label_int(info, "block_size") or 16
    unit = cache_unit(block, arm.parallelism.dcp, arm.parallelism.pcp)  # the scheduler's block: what a hit is made of
    caching_on = prefix_caching_on(arm.server.enable_prefix_caching, info)
    try:
        plan = plan_grid(workload, prompts.all(), sweep.all(), caching_on, unit,
                         arm.server.max_num_seqs or workload.burst_max)
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    caching = "on" if caching_on else (f"off on arm {arm.name!r}: warm and partial requests recompute the prompt (no "
                                       "prefix-cache hit to prove); enable prefix caching to check cached KV")
    sink = session.run_dir / arm.name / f"long_context_vs_{stored.arm}_comparisons.jsonl"
    grid_limits = GridLimits.of(limits, burst_limits, gates.long_context.retrieval_margin)
    outcome = run_grid(GridClient(candidate, sampling, f"long-context-{session.run_id}"), plan,
                       {**stored.outputs, **long_context_sweep_outputs.outputs}, grid_limits, sink)
    cells, checks, floors = outcome.cells, [], []
    for grid_check in outcome.checks():  # long_context, and long_context_bursts where bursts were planned
        check, compared = grid_check.limits.check, grid_check.compared
        judged = check.judge(record_fields(grid_check.name, stored.arm, stored.key, compared, check.drift_limit,
                                           grid_check.sink, grid_check.beyond_comparisons, check.tie_gap),
                             compared.comparisons, bool(compared.aborted))
        hits = [c.cached_tokens for c in grid_check.cells if c.cached_tokens is not None]
        checks.append(record(ReferenceCheckRecord, arm=arm.name, of=judged.fields, checked_to_tokens=checked_to_tokens(
            grid_check.cells), cached_tokens_proven=sum(hits) if hits else None))
        floors += [judged.floor_failure] if judged.floor_failure else []
    first, to = first_failing_length(cells), checked_to_tokens(cells)
    failures = [f for c in cells for f in c.failures] + floors
    if outcome.aborted:
        failures.insert(0, f"aborted after {len(cells)}/{outcome.planned} cell(s): {outcome.aborted.splitlines()[0]}")
    grid_rec = record(LongContextRecord, arm=arm.name, workload=workload.name, reference=stored.arm,
                      reference_key=stored.key, prompts_sha=prompts.fingerprint(), needle_source=prompts.needle_source,
                      prefix_caching=caching, lengths=sorted(workload.lengths), depths=list(workload.depths),
                      modes=list(workload.modes),
                      cells=cells, first_failing_length=first, checked_to_tokens=to,
                      passed=not failures and all(c.passed for c in checks), failures=failures,
                      status="aborted" if outcome.aborted else "complete", reason=outcome.aborted,
                      comparisons_path=str(sink), bursts_planned=outcome.bursts_planned,
                      sweep_lengths=sorted({c.length for c in sweep.cells}), length_seed=session.length_seed,
                      sweep_planned=len(sweep.cells),
                      batch_invariance=outcome.batch_invariance())
    # the live verdict, as `harness report` recomputes it from the records
    (gate,) = catalogue_gates(BY_NAME["long_context"], session.records(), arm.name, stored.arm,
                              under_test.thresholds())
    record(GateRecord, **gate.record_fields())
    where = f"FIRST FAILING LENGTH {first:,} tokens; " if first is not None else ""
    seed = f"; sweep lengths of --length-seed {session.length_seed}" if sweep.cells else ""
    assert grid_rec.passed, (f"long_context on {arm.name!r} vs {stored.arm!r} (reference {stored.path}): {where}"
                             f"{grid_summary(cells, outcome.planned)}{seed}; prefix caching {caching}:\n"
                             + "\n".join(failures or [d for c in checks for d in c.diverged]))
