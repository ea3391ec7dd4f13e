"""The long_context table and heatmap: candidate beside reference per length x depth, the first failing length named,
missing or aborted cells read FAIL (no data), never PASS."""

from __future__ import annotations

from harness.report import plots
from harness.report.long_context import batch_invariance_table, heatmaps, long_context_table
from harness.report.tables import build_tables, to_markdown
from tests.judge.test_long_context_gate import grid, with_bursts

GOLDEN = """\
| Arm vs reference     |   Length | depth 0.05                                                         | depth 0.95                                                         | Sequential               | Burst   | Verdict                     |
|----------------------|----------|--------------------------------------------------------------------|--------------------------------------------------------------------|--------------------------|---------|-----------------------------|
| cpu-smoke vs cpu-ref |      512 | PASS, copy 1.00 vs 1.00                                            | PASS, copy 1.00 vs 1.00                                            | 8 exact / 0 tie / 0 fail | not run | PASS                        |
| cpu-smoke vs cpu-ref |    1,024 | FAIL cold, warm, partial, forced (from token 1), copy 1.00 vs 1.00 | FAIL cold, warm, partial, forced (from token 1), copy 1.00 vs 1.00 | 0 exact / 0 tie / 8 fail | not run | FAIL (first failing length) |
| cpu-smoke vs cpu-ref |    4,000 | FAIL cold, warm, partial, forced (from token 1), copy 1.00 vs 1.00 | FAIL cold, warm, partial, forced (from token 1), copy 1.00 vs 1.00 | 0 exact / 0 tie / 8 fail | not run | FAIL                        |"""


def test_table_names_the_first_failing_length_and_each_failing_mode():
    assert to_markdown(long_context_table([grid(fail_at=1024)])) == GOLDEN


def test_missing_and_aborted_cells_read_no_data():
    df = long_context_table([grid(drop=1, status="aborted", reason="length 4000, depth 0.95: server died\ntail")])
    by_length = {r["Length"]: r for r in df.to_dict("records")}
    assert by_length["1,024"]["Verdict"] == "PASS"
    assert by_length["4,000"]["depth 0.05"] == "PASS, copy 1.00 vs 1.00"
    assert by_length["4,000"]["depth 0.95"] == "no data (3/4 modes compared)"
    assert by_length["4,000"]["Verdict"] == "FAIL (no data: aborted before it)"
    assert by_length["all"]["Verdict"] == "FAIL (no data: aborted: length 4000, depth 0.95: server died)"


def test_heatmap_puts_candidate_beside_reference_and_draws():
    [m] = heatmaps([grid(fail_at=4000, drop=1)])
    assert m.title == "cpu-smoke vs cpu-ref: first failing length 4,000"
    assert m.lengths == [512, 1024, 4000] and m.depths == [0.05, 0.95]
    assert m.status == [["pass", "pass"], ["pass", "pass"], ["fail", "missing"]]
    assert m.labels[2] == ["FAIL\ncold,warm,partial,forced", "no data"]
    assert m.candidate[0] == [1.0, 1.0] and m.reference[0] == [1.0, 1.0]
    image = plots.long_context_heatmap([m])
    assert image is not None and image.startswith(b"\x89PNG")
    assert plots.long_context_heatmap(heatmaps([])) is None


def test_the_run_tables_include_the_grid():
    titles = [t for t, _ in build_tables([grid()], ["cpu-smoke", "cpu-ref"])]
    assert titles.index("Long context") == titles.index("Reference checks") + 1
    assert to_markdown(dict(build_tables([], []))["Long context"]) == "_(no results: suite not run)_"


def test_burst_counts_sit_beside_the_sequential_ones_and_batch_invariance_has_its_table():
    g = with_bursts(grid(), fail_length=4000)
    by_length = {r["Length"]: r for r in long_context_table([g]).to_dict("records")}
    assert by_length["512"]["Sequential"] == "8 exact / 0 tie / 0 fail"
    assert by_length["512"]["Burst"] == "2 exact / 0 tie / 0 fail"
    assert by_length["4,000"]["Burst"] == "0 exact / 0 tie / 2 fail"
    assert by_length["4,000"]["Verdict"] == "FAIL (first failing length)"
    assert "burst" in by_length["4,000"]["depth 0.05"]
    rows = {r["Batch"]: r for r in batch_invariance_table([g]).to_dict("records")}
    assert rows[2]["Verdict"] == "FAIL" and rows[2]["Exact vs alone"] == "4/6" and rows[2]["Failed"] == 2
    clean = {r["Batch"]: r for r in batch_invariance_table([with_bursts(grid())]).to_dict("records")}
    assert clean[2]["Verdict"] == "PASS" and clean[2]["Exact vs alone"] == "6/6"


def test_bursts_planned_but_none_compared_read_no_data():
    g = with_bursts(grid(), fail_length=None).model_copy(update={"batch_invariance": []})
    [row] = batch_invariance_table([g]).to_dict("records")
    assert row["Verdict"].startswith("FAIL (no data: 6 burst cells planned")


def test_sweep_row_names_its_lengths_seed_and_first_failing_sweep_length():
    from harness.records.schema import LongContextCell

    g = grid()
    sweep = [LongContextCell(length=n, depth=0.5, mode="sweep", exact=n < 3000, first_divergence=None if n < 3000
                             else 2, passed=n < 3000, context_tokens=n + 16,
                             failures=[] if n < 3000 else [f"request L{n}-d0.5-sweep: token 2 differs"])
             for n in (700, 2500, 3100)]
    g = g.model_copy(update={"cells": [*g.cells, *sweep], "sweep_lengths": [700, 2500, 3100], "length_seed": 42,
                             "sweep_planned": 3, "passed": False, "first_failing_length": 3100})
    row = long_context_table([g]).to_dict("records")[-1]
    assert row["Length"] == "sweep: 3 lengths 700..3,100 (seed 42)"
    assert row["Sequential"] == "2 exact / 0 tie / 1 fail" and row["Verdict"] == "FAIL (from 3,100, the first failing length)"
    short = g.model_copy(update={"cells": g.cells[:-1]})
    assert long_context_table([short]).to_dict("records")[-1]["Verdict"] == "FAIL (no data: 2/3 sweep lengths compared)"
