"""The long_context gate from the grid record alone: complete and exact passes; a failing grid names its first
failing length; missing, aborted or partial grids are FAIL (no data)."""

from __future__ import annotations

from harness.config.thresholds import Gates
from harness.judge.long_context import long_context_gate
from harness.judge.suite_gates import evaluate_gates, gated_suites
from harness.records.schema import BatchInvarianceRow, LongContextCell, LongContextRecord


def cell(length: int, depth: float, mode: str, passed: bool = True) -> LongContextCell:
    return LongContextCell(length=length, depth=depth, mode=mode, exact=passed,
                           first_divergence=None if passed else 1, passed=passed, retrieval_candidate=1.0,
                           retrieval_reference=1.0, context_tokens=length + 16,
                           failures=[] if passed else [f"request L{length}-d{depth:g}-{mode}: token 1 differs"])


def grid(fail_at: int | None = None, drop: int = 0, **kw) -> LongContextRecord:
    cells = [cell(n, d, m, passed=fail_at is None or n < fail_at)
             for n in (512, 1024, 4000) for d in (0.05, 0.95) for m in ("cold", "warm", "partial", "forced")]
    cells = cells[:len(cells) - drop]
    failures = [f for c in cells for f in c.failures]
    fields = {"run_id": "r", "arm": "cpu-smoke", "suite": "long_context", "workload": "long_context_cpu",
              "reference": "cpu-ref", "reference_key": "k", "prompts_sha": "p", "needle_source": "x",
              "prefix_caching": "on", "lengths": [512, 1024, 4000], "depths": [0.05, 0.95],
              "modes": ["cold", "warm", "partial"], "cells": cells,
              "first_failing_length": fail_at, "checked_to_tokens": 4016, "passed": not failures, "failures": failures}
    return LongContextRecord(**{**fields, **kw})


def with_bursts(g: LongContextRecord, fail_length: int | None = None) -> LongContextRecord:
    """The grid plus one burst per length (its two depths at once, batch 2); cells of `fail_length` fail there."""
    bursts = [c.model_copy(update={"mode": "burst", "batch": 2, "burst": f"L{c.length} depths",
                                   "passed": c.length != fail_length, "exact": c.length != fail_length,
                                   "alone_exact": c.length != fail_length,
                                   "failures": [] if c.length != fail_length else ["burst differs"]})
              for c in g.cells if c.mode == "cold"]
    failed = sum(not b.passed for b in bursts)
    row = BatchInvarianceRow(batch=2, requests=len(bursts), exact=len(bursts) - failed, tie_flips=0, failed=failed,
                             first_divergence_min=1 if failed else None, max_drift=None, lengths=g.lengths)
    return g.model_copy(update={"cells": [*g.cells, *bursts], "bursts_planned": len(bursts),
                                "batch_invariance": [row], "passed": g.passed and not failed,
                                "first_failing_length": g.first_failing_length or fail_length})


def test_burst_cells_count_in_the_plan_and_a_missing_one_is_no_data():
    full = with_bursts(grid())
    assert long_context_gate([full], "cpu-smoke", "cpu-ref").passed
    short = full.model_copy(update={"cells": full.cells[:-1]})
    g = long_context_gate([short], "cpu-smoke", "cpu-ref")
    assert not g.passed and g.detail == "no data: cpu-smoke long_context compared 29 of 30 cells"
    failing = long_context_gate([with_bursts(grid(), fail_length=4000)], "cpu-smoke", "cpu-ref")
    assert not failing.passed and failing.detail.startswith("first failing length 4,000 tokens")


def test_a_complete_exact_grid_passes_with_its_coverage():
    g = long_context_gate([grid()], "cpu-smoke", "cpu-ref")
    assert g.passed and g.gate == "long_context_outputs"
    assert g.detail == ("24 cells of 3 lengths (to 4,000) x 2 depths x cold/warm/partial/forced equal cpu-ref's, "
                        "outputs checked to 4,016 tokens")
    assert g.numbers["checked_to_tokens"] == 4016 and g.numbers["failed_cells"] == 0


def test_a_fault_past_a_length_fails_naming_the_first_failing_length():
    g = long_context_gate([grid(fail_at=1024)], "cpu-smoke", "cpu-ref")
    assert not g.passed and g.detail.startswith("first failing length 1,024 tokens: request L1024-d0.05-cold")
    assert "(+13 more)" in g.detail and g.numbers["first_failing_length"] == 1024


def test_missing_aborted_or_partial_grids_are_fail_no_data():
    assert long_context_gate([], "cpu-smoke", "cpu-ref").detail == "no data: no long_context record for cpu-smoke"
    aborted = long_context_gate([grid(drop=8, status="aborted", reason="length 4000, depth 0.05: server died\nlog")],
                                "cpu-smoke", "cpu-ref")
    assert not aborted.passed and aborted.detail == ("no data: cpu-smoke long_context aborted after 16/24 cell(s): "
                                                     "length 4000, depth 0.05: server died")
    partial = long_context_gate([grid(drop=1)], "cpu-smoke", "cpu-ref")
    assert not partial.passed and partial.detail == "no data: cpu-smoke long_context compared 23 of 24 cells"
    other = long_context_gate([grid()], "cpu-smoke", "tp8")
    assert not other.passed and "compares with cpu-ref, not tp8" in other.detail


def test_registered_with_the_suite_gates():
    records = [grid(fail_at=512)]
    assert gated_suites(records) == ["long_context"]
    [g] = evaluate_gates(records, "cpu-smoke", "cpu-ref", Gates(), ["long_context"])
    assert not g.passed and "first failing length 512" in g.detail
    assert evaluate_gates(records, "cpu-smoke", "cpu-ref", Gates(), ["gsm8k"])[0].gate == "gsm8k_paired_accuracy"
