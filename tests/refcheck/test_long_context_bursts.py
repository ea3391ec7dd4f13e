"""long_context's bursts as a reference check of their own (issue 45 item 5): the grid hands the suite two checks --
long_context (cells one at a time and the sweep) and long_context_bursts (the bursts against the reference and against
the candidate's own output alone), each with its own comparisons and file; a workload without bursts has no bursts
check, and bursts planned but not compared are no data, never a PASS; a calibration repeat yields each check's
comparisons from its own file, so `harness calibrate` measures the bursts' spread apart from the sequential one."""

from __future__ import annotations

from pathlib import Path

from harness.calibrate.repeats import read_repeat
from harness.measure.generation import Generation
from harness.records.schema import LongContextCell, ReferenceCheckRecord, RequestComparison, ServerRecord
from harness.refcheck.judging.bursts import judge_burst
from harness.refcheck.judging.compare import compare_outputs
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields
from harness.refcheck.judging.long_context_cells import CellOutput
from harness.refcheck.prompts.long_context import ContextCell
from harness.refcheck.send.long_context_grid import BURSTS, GridCheck, GridOutcome, bursts_missing, bursts_sink
from tests.cell_limits import cell_limits

ARM = "cpu-smoke"
LIMITS = cell_limits(0.01, 0.0, 0.1)


def comparison(request: str, drift: float, exact: bool = True) -> RequestComparison:
    return RequestComparison(request=request, prompt_tokens=4000, exact=exact, first_divergence=None if exact else 3,
                             candidate_tokens=24, reference_tokens=24, finite=True, max_drift=drift,
                             reference_gap_at_divergence=None if exact else 2.0, deltas=[drift] * 3)


def cell(mode: str, passed: bool = True) -> LongContextCell:
    return LongContextCell(length=4000, depth=0.5, mode=mode, exact=passed, first_divergence=None, passed=passed,
                           context_tokens=4024, batch=3 if mode == "burst" else 1)


def outcome(sink: Path, sequential: BatchComparisons, cells: list[LongContextCell] = (),
            bursts: BatchComparisons | None = None,
            burst_cells: list[LongContextCell] = (), bursts_beyond: list[str] = (), bursts_planned: int = 0):
    """A grid's outcome as the executor leaves it: long_context's check, and the bursts' where any were planned."""
    burst_check = None if bursts is None else GridCheck(BURSTS, bursts_sink(sink), LIMITS, bursts, list(bursts_beyond),
                                                        list(burst_cells))
    return GridOutcome(GridCheck("long_context", sink, LIMITS, sequential, [], list(cells)), burst_check,
                       planned=len(cells) + bursts_planned, bursts_planned=bursts_planned)


def test_the_grid_is_two_checks_each_with_its_own_comparisons_and_file(tmp_path):
    sink = tmp_path / "long_context_vs_cpu-ref_comparisons.jsonl"
    seq = BatchComparisons(comparisons=[comparison("L4000-d0.5-cold", 0.0), comparison("L2713-d0.5-sweep", 0.0)])
    burst = BatchComparisons(comparisons=[comparison("L4000-d0.5-burst-mixed 2", 0.2),
                                  comparison("L4000-d0.5-burst-mixed 2-vs-alone", 0.2)])
    grid = outcome(sink, seq, [cell("cold"), cell("sweep")], burst, [cell("burst")], bursts_planned=1)
    lc, bursts = grid.checks()
    assert (lc.name, bursts.name) == ("long_context", "long_context_bursts")
    assert bursts.sink.name == "long_context_bursts_vs_cpu-ref_comparisons.jsonl" and lc.sink == sink
    assert [c.mode for c in lc.cells] == ["cold", "sweep"] and [c.mode for c in bursts.cells] == ["burst"]
    assert [c.mode for c in grid.cells] == ["cold", "sweep", "burst"]
    # each judged by its own limits: 0.2 of batch-composition drift fails at the one-at-a-time cells' 0.01 and stands
    # at a limit measured on bursts
    assert not record_fields(BURSTS, "cpu-ref", "k", bursts.compared, 0.01, bursts.sink,
                             bursts.beyond_comparisons).passed
    fields = record_fields(BURSTS, "cpu-ref", "k", bursts.compared, 0.3, bursts.sink, bursts.beyond_comparisons)
    assert fields.passed and fields.requests == 2 and fields.check == "long_context_bursts"
    assert record_fields("long_context", "cpu-ref", "k", lc.compared, 0.01, lc.sink,
                         lc.beyond_comparisons).requests == 2


def test_a_workload_without_bursts_records_no_bursts_check():
    grid = outcome(Path("long_context_vs_cpu-ref_comparisons.jsonl"),
                   BatchComparisons(comparisons=[comparison("L4000-d0.5-cold", 0.0)]), [cell("cold")])
    assert [c.name for c in grid.checks()] == ["long_context"] and grid.batch_invariance() == []


def test_bursts_planned_and_not_compared_fail_no_data_never_pass():
    assert bursts_missing(6, 6) == [] and bursts_missing(6, 0) == ["no data: 0 of 6 burst cells compared"]
    sink = Path("long_context_vs_cpu-ref_comparisons.jsonl")
    stopped = outcome(sink, BatchComparisons(aborted="length 4000, depth 0.5: server died"),
                      bursts=BatchComparisons(aborted="not run: the grid stopped before its bursts (server died)"),
                      bursts_beyond=bursts_missing(6, 0), bursts_planned=6)
    [_, bursts] = stopped.checks()
    fields = record_fields(BURSTS, "cpu-ref", "k", bursts.compared, 0.3, bursts.sink, bursts.beyond_comparisons)
    assert not fields.passed and fields.status == "aborted" and fields.requests == 0
    assert fields.diverged[:2] == ["aborted after 0 comparison(s): not run: the grid stopped before its bursts "
                                   "(server died)", "no data: 0 of 6 burst cells compared"]
    assert stopped.aborted.startswith("length 4000")
    # even a run that did not abort: fewer compared than planned is no data
    short = outcome(sink, BatchComparisons(),
                    bursts=BatchComparisons(comparisons=[comparison(f"b{i}", 0.0) for i in range(4)]),
                    bursts_beyond=bursts_missing(6, 4), bursts_planned=6)
    bursts = short.checks()[1]
    fields = record_fields(BURSTS, "cpu-ref", "k", bursts.compared, 0.3, bursts.sink, bursts.beyond_comparisons)
    assert not fields.passed and "no data: 4 of 6 burst cells compared" in fields.diverged


def test_a_burst_output_is_judged_by_the_limits_it_is_given():
    c = ContextCell("L4000-d0.5", [1] * 4000, "length 4000, depth 0.5", 4000, 0.5, 0, [7, 8, 9])
    ref, burst = (Generation([7, 8, 9], [lp] * 3, [{t: lp} for t in (7, 8, 9)]) for lp in (-0.1, -0.3))
    vs_ref = compare_outputs("L4000-d0.5-burst-mixed 2", 4000, burst, ref, c.group)
    vs_alone = compare_outputs("L4000-d0.5-burst-mixed 2-vs-alone", 4000, burst, burst, c.group)
    out = CellOutput(c, vs_ref, burst.token_ids, ref.token_ids)
    at_sequential = judge_burst(out, vs_alone, "mixed 2", 2, cell_limits(0.01, 0.0, 0.1))
    at_own = judge_burst(out, vs_alone, "mixed 2", 2, cell_limits(0.25, 0.0, 0.1))
    assert not at_sequential.passed and at_own.passed


def write_repeat(run_dir: Path, floor: Path, k: int) -> None:
    """One calibration repeat of the long_context suite as the suite records it: two checks, two files."""
    out = run_dir / ARM
    out.mkdir(parents=True)
    lines = [ServerRecord(run_id=run_dir.name, arm=ARM, suite="launch", status="up", vllm_version="0.32.0")]
    for check, drift in (("long_context", 0.0), (BURSTS, 0.1 + 0.01 * k)):
        sink = out / f"{check}_vs_cpu-ref_comparisons.jsonl"
        comps = [comparison(f"L4000-d{d}-{check}", drift) for d in (0.05, 0.5, 0.95)]
        sink.write_text("".join(c.model_dump_json() + "\n" for c in comps))
        lines.append(ReferenceCheckRecord(run_id=run_dir.name, arm=ARM, suite="long_context", check=check,
                                          reference="cpu-ref", reference_key="k", passed=True, detail="d",
                                          requests=3, exact_matches=3, first_divergence_min=None, max_drift=drift,
                                          nonfinite=0, drift_limit=0.01, comparisons_path=str(sink),
                                          floor_path=str(floor)))
    (run_dir / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in lines))


def test_a_calibration_repeat_reads_the_bursts_as_a_check_of_their_own(tmp_path):
    write_repeat(tmp_path / "cal-r1", tmp_path / "floor", 1)
    measured = read_repeat(tmp_path / "cal-r1", ARM)
    assert set(measured) == {"long_context", "long_context_bursts"}
    assert [c.max_drift for c in measured["long_context"].comparisons] == [0.0] * 3
    assert [c.max_drift for c in measured[BURSTS].comparisons] == [0.11] * 3
    assert all(c.request.endswith("-long_context_bursts") for c in measured[BURSTS].comparisons)


def test_the_history_counts_the_bursts_at_their_batch_sizes_from_the_grid_not_as_batch_1():
    from harness.history.extract import coverage_of
    from tests.judge.test_long_context_gate import grid, with_bursts

    g = with_bursts(grid())
    bursts = ReferenceCheckRecord(run_id="r", arm=ARM, suite="long_context", check=BURSTS, reference="cpu-ref",
                                  reference_key="k", passed=True, detail="d", requests=12, exact_matches=12,
                                  first_divergence_min=None, max_drift=0.0, nonfinite=0, drift_limit=0.01,
                                  checked_to_tokens=4016)
    rows = coverage_of([bursts, g])
    assert {r.check for r in rows} == {"long_context"} and {r.batch for r in rows} == {1, 2}
