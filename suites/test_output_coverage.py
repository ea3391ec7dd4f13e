"""Outputs checked wherever the work goes (workload output_coverage, harness/refcheck/coverage_cells.py): deep into a
generation, at a few tokens, either side of every chunked-prefill boundary, over the turns of a session, on blocks
recycled from other requests, and under KV pressure with preemption. Each family is a reference check of its own,
judged by its own limits and floor (its calibration's, or gates.yaml's): every output against the reference arm's
output of the same prompt sent alone. A family whose server counters cannot prove it did what it covers (no
preemption, no eviction, no reuse of the earlier turns) reads FAIL (no data), never PASS."""

from __future__ import annotations

import pytest

from harness.measure.metrics import cache_config, fetch_metrics
from harness.pytest_plugin.floors import check_limits, with_floor
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.batches import record_fields
from harness.refcheck.compare import checked_to
from harness.refcheck.coverage_cells import (
    CHUNK,
    LONG_GENERATION,
    MULTI_TURN,
    PRESSURE,
    RECYCLED,
    SHORT,
    fill_plan,
    random_tokens,
)
from harness.refcheck.coverage_send import (
    CoverageServer,
    FamilyRun,
    alone_then_together,
    kv_pressure,
    multi_turn,
    recycled_blocks,
)


def skip_reason(session, arm_name: str, served: bool) -> str | None:
    """Read before any server starts: every cell is compared with the reference's output."""
    if session.run.arm_set.reference_of(arm_name) is None:
        return f"arm {arm_name!r} names no reference arm: output_coverage compares a candidate with its reference"
    return None


def caching(candidate) -> bool:
    info = cache_config(fetch_metrics(candidate.info.base_url))
    return candidate.arm.server.enable_prefix_caching is not False and info.get("enable_prefix_caching") != "False"


def server_for(check: str, candidate, stored, session) -> CoverageServer:
    """The family's server view, its comparisons file emptied (a rerun of the check starts it anew)."""
    w, _, _ = session.references.coverage_prompts(session.candidate_name)
    sink = session.run_dir / candidate.arm.name / f"{check}_vs_{stored.arm}_comparisons.jsonl"
    sink.parent.mkdir(parents=True, exist_ok=True)
    sink.unlink(missing_ok=True)
    return CoverageServer(candidate, w.top_logprobs, f"coverage-{session.run_id}-{check}", sink)


def judge(check: str, fam: FamilyRun, server: CoverageServer, stored, candidate, session, record):
    """The family's ReferenceCheckRecord, judged by the check's limits and floor; the assertion names every failure."""
    arm, gates = candidate.arm, session.thresholds()
    limits = check_limits(gates.reference_checks, arm, check, stored.noise_key, session.run.calibration_repeat,
                          session.run.build_of(arm.name))
    fields = record_fields(check, stored.arm, stored.key, fam.run, limits.drift_limit, server.sink, fam.extra,
                           limits.tie_gap)
    fields = with_floor(fields, stored, fam.run, limits, gates.degeneration)
    if fam.notes:
        fields = fields.model_copy(update={"detail": "; ".join([fields.detail, *fam.notes])})
    rec = record(ReferenceCheckRecord, arm=arm.name, of=fields, checked_to_tokens=checked_to(fam.run.comparisons),
                 cached_tokens_proven=fam.cached_tokens, preemptions_proven=fam.preemptions, covered=fam.covered)
    assert rec.passed, (f"{check} on {arm.name!r} vs {stored.arm!r} (reference {stored.path}): {rec.detail}\n"
                        + "\n".join(rec.diverged) + (f"\n{fam.run.aborted}" if fam.run.aborted else ""))


def cells_of(session, family: str):
    _, prompts, _ = session.references.coverage_prompts(session.candidate_name)
    return prompts.family(family)


@pytest.mark.parametrize("check", [LONG_GENERATION, SHORT, CHUNK])
def test_output_coverage(check, coverage_outputs, candidate, harness_session, record):
    """Long generations, short prompts and chunk boundaries: each cell alone, then all of a family at once (short
    prompts decoding side by side; prefill chunks of the long ones mixed with the short ones' decode steps)."""
    server = server_for(check, candidate, coverage_outputs, harness_session)
    cells = cells_of(harness_session, check)
    fam = alone_then_together(server, cells, coverage_outputs.outputs, check, together=check != LONG_GENERATION)
    judge(check, fam, server, coverage_outputs, candidate, harness_session, record)


def test_multi_turn(coverage_outputs, candidate, harness_session, record):
    server = server_for(MULTI_TURN, candidate, coverage_outputs, harness_session)
    _, prompts, _ = harness_session.references.coverage_prompts(harness_session.candidate_name)
    fam = multi_turn(server, prompts, coverage_outputs.outputs, caching(candidate))
    judge(MULTI_TURN, fam, server, coverage_outputs, candidate, harness_session, record)


def unplanned(session, family: str) -> None:
    """A workload without the family's section skips its check, saying why and what to do."""
    w, _, _ = session.references.coverage_prompts(session.candidate_name)
    if getattr(w, {PRESSURE: "pressure", RECYCLED: "recycled"}[family]) is None:
        pytest.skip(f"workload {w.name!r} plans no {family} cells: they need a KV pool the run can overfill (cap the "
                    "arm's KV with server.kv_cache_blocks and add the section)")


def test_recycled_blocks(coverage_outputs, candidate, harness_session, record):
    unplanned(harness_session, RECYCLED)
    server = server_for(RECYCLED, candidate, coverage_outputs, harness_session)
    w, _, space = harness_session.references.coverage_prompts(harness_session.candidate_name)
    pool, _ = server.pool()
    r = w.recycled
    fill_lengths = fill_plan(pool, r.fill_factor, r.fill_prompt_tokens) if pool else []
    fam = FamilyRun()
    if pool is None:
        fam.extra.append("no data: /metrics has no vllm:cache_config_info num_gpu_blocks; the fill cannot be sized")
    elif sum(fill_lengths) > r.max_fill_tokens:
        fam.extra.append(f"no data: filling the KV pool of {pool:,} tokens takes {sum(fill_lengths):,} tokens, more "
                         f"than workload {w.name!r} recycled.max_fill_tokens {r.max_fill_tokens:,}: cap the arm's KV "
                         "(server.kv_cache_blocks) or raise max_fill_tokens")
    else:
        fill = [random_tokens(space, w.seed, f"fill-{i}", n) for i, n in enumerate(fill_lengths)]
        fam = recycled_blocks(server, cells_of(harness_session, RECYCLED), coverage_outputs.outputs, fill,
                              caching(candidate))
    judge(RECYCLED, fam, server, coverage_outputs, candidate, harness_session, record)


def test_kv_pressure(coverage_outputs, candidate, harness_session, record):
    unplanned(harness_session, PRESSURE)
    server = server_for(PRESSURE, candidate, coverage_outputs, harness_session)
    fam = kv_pressure(server, cells_of(harness_session, PRESSURE), coverage_outputs.outputs)
    judge(PRESSURE, fam, server, coverage_outputs, candidate, harness_session, record)
