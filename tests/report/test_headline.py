"""One truth in the headline (issue 45 item 7): the long_context check's line counts every cell the grid judged --
sequential, sweep and burst -- and reads the long_context_outputs gate's verdict, so "PASS (48/48 exact)" never sits
beside a failing gate. The records are the ones a run writes: the grid record and its two reference checks."""

from __future__ import annotations

from harness.judge.long_context import long_context_gate
from harness.records.schema import ReferenceCheckRecord
from harness.report.headline import check_lines, headline
from tests.judge.test_long_context_gate import grid, with_bursts

CAND, REF = "cpu-smoke", "cpu-ref"


def with_sweep(g, fail_length: int | None = None):
    """The grid plus a sweep of one depth at three lengths between its own; cells at `fail_length` fail."""
    sweep = [c.model_copy(update={"mode": "sweep", "length": n, "passed": n != fail_length,
                                  "exact": n != fail_length,
                                  "failures": [] if n != fail_length else [f"request L{n}-sweep: token 1 differs"]})
             for c, n in zip([c for c in g.cells if c.mode == "cold"][:3], (700, 2500, 3300), strict=True)]
    failed = [f for c in sweep for f in c.failures]
    return g.model_copy(update={"cells": [*g.cells, *sweep], "sweep_planned": 3, "sweep_lengths": [700, 2500, 3300],
                                "passed": g.passed and not failed, "failures": [*g.failures, *failed],
                                "first_failing_length": min(x for x in (g.first_failing_length, fail_length) if x)
                                if (g.first_failing_length or fail_length) else None})


def check(name: str, requests: int, passed: bool = True, floor: str | None = None) -> ReferenceCheckRecord:
    """The grid's check records as the suite writes them: each counts only its own comparisons."""
    return ReferenceCheckRecord(run_id="r", arm=CAND, suite="long_context", check=name, reference=REF,
                                reference_key="k", passed=passed, detail=f"{name}: {requests}/{requests} exact",
                                requests=requests, exact_matches=requests, first_divergence_min=None, max_drift=0.0,
                                nonfinite=0, drift_limit=0.01, floor=floor,
                                judged_by="gates.yaml, not calibrated: limit 0.01, tie gap 0")


def line(records: list) -> str:
    [found] = [x for x in check_lines(records, CAND, [], ref=REF) if x.startswith("Check long_context ")]
    return found


def test_a_clean_grid_passes_counting_its_sweep_and_burst_cells():
    g = with_sweep(with_bursts(grid()))
    records = [check("long_context", 27), check("long_context_bursts", 12), g]
    text = line(records)
    assert text == ("Check long_context vs cpu-ref: PASS (33/33 cells pass, 33 exact: sequential 24/24, sweep 3/3, "
                    "burst 6/6; long_context not calibrated; long_context_bursts not calibrated)")
    assert long_context_gate(records, CAND, REF).passed
    # the grid's two checks are that one line, not lines of their own
    assert not any(x.startswith("Check long_context_bursts") for x in check_lines(records, CAND, [], ref=REF))


def test_a_burst_only_failure_fails_the_line_naming_the_burst_cells_and_agrees_with_the_gate():
    # the evidence page's contradiction: the sequential check passes 48/48 exact while the bursts fail
    g = with_sweep(with_bursts(grid(), fail_length=4000))
    records = [check("long_context", 27), check("long_context_bursts", 12, passed=False), g]
    text, gate = line(records), long_context_gate(records, CAND, REF)
    assert not gate.passed and text.startswith("Check long_context vs cpu-ref: FAIL (31/33 cells pass")
    assert "sequential 24/24, sweep 3/3, burst 4/6; failing: burst at 4,000 tokens x2" in text, text
    assert "PASS" not in text


def test_a_sweep_only_failure_fails_the_line_naming_the_sweep_length_and_agrees_with_the_gate():
    g = with_sweep(with_bursts(grid()), fail_length=2500)
    records = [check("long_context", 27, passed=False), check("long_context_bursts", 12), g]
    text, gate = line(records), long_context_gate(records, CAND, REF)
    assert not gate.passed and gate.detail.startswith("first failing length 2,500 tokens")
    assert text.startswith("Check long_context vs cpu-ref: FAIL (32/33 cells pass, 32 exact: sequential 24/24, "
                           "sweep 2/3, burst 6/6; failing: sweep at 2,500 tokens x1"), text


def test_a_floor_failure_without_a_failing_cell_fails_the_line_and_says_which_floor():
    g = with_bursts(grid()).model_copy(update={"passed": False, "failures": ["FAIL: Wilcoxon signed-rank ..."]})
    floor = "FAIL: Wilcoxon signed-rank on per-request max |delta logprob| vs the calibration c: p = 0.001"
    records = [check("long_context", 24), check("long_context_bursts", 12, passed=False, floor=floor), g]
    text = line(records)
    assert text.startswith("Check long_context vs cpu-ref: FAIL (30/30 cells pass") and \
        "long_context_bursts vs its floor: FAIL" in text and "the grid failed: FAIL: Wilcoxon" in text, text


def test_line_and_gate_agree_on_every_kind_of_grid():
    cases = {"clean": with_sweep(with_bursts(grid())), "burst": with_sweep(with_bursts(grid(), fail_length=512)),
             "sweep": with_sweep(with_bursts(grid()), fail_length=700), "sequential": with_bursts(grid(fail_at=1024)),
             "partial": with_bursts(grid()).model_copy(update={"cells": grid().cells}),
             "aborted": grid(drop=4, status="aborted", reason="server died")}
    for name, g in cases.items():
        records = [check("long_context", 24), g]
        verdict = line(records).split(": ", 1)[1].split(" ", 1)[0]
        gate = long_context_gate(records, CAND, REF)
        assert (verdict == "PASS") == gate.passed, (name, verdict, gate.detail)
        assert (verdict == "aborted") == (name == "aborted"), name


def test_the_headline_carries_the_grid_line_and_a_run_without_a_grid_keeps_each_check():
    g = with_bursts(grid(), fail_length=4000)
    lines = headline([check("long_context", 24), check("long_context_bursts", 12, passed=False), g],
                     [(CAND, REF)], [])
    assert [x for x in lines if x.startswith("Check ")] == [line([check("long_context", 24),
                                                                  check("long_context_bursts", 12, passed=False), g])]
    # without the grid record (a run that predates it), the checks' own lines stay
    assert [x for x in check_lines([check("long_context", 24)], CAND, [], ref=REF)] == [
        "Check long_context vs cpu-ref: PASS (24/24 exact; not calibrated)"]


def test_the_gates_own_sentence_counts_the_sweep_and_burst_cells():
    gate = long_context_gate([with_sweep(with_bursts(grid()))], CAND, REF)
    assert gate.passed and gate.detail.startswith("33 cells of 3 lengths (to 4,000) x 2 depths x "
                                                  "cold/warm/partial/forced, 3 sweep, 6 burst equal cpu-ref's")
