"""The RULER table from plain records: per task and length, arms side by side, each arm's total last."""

from harness.records.schema import RulerCell, RulerRecord
from harness.report.tables import ruler_table


def rec(arm: str, correct: int, **kw) -> RulerRecord:
    cells = [RulerCell(task="ruler_vt", length=1024, n=2, correct=correct, score=correct / 2),
             RulerCell(task="ruler_vt", length=4032, n=2, correct=0, score=0.25, request_errors=1)]
    per = {"ruler_vt@1024#0": correct > 0, "ruler_vt@1024#1": correct > 1, "ruler_vt@4032#0": False,
           "ruler_vt@4032#1": False}
    fields = dict(run_id="r", arm=arm, suite="ruler", workload="ruler_cpu", tasks=["ruler_vt"],
                  max_seq_lengths=[1024, 4032], limit=2, tokenizer="tok", data_sha="s", lm_eval_version="0.4.13", n=4,
                  cells=cells, request_errors=1, status="complete", wall_s=1.0, num_concurrent=4, samples_path=None,
                  per_sample=per)
    return RulerRecord(**{**fields, **kw})


def test_ruler_table_puts_the_arms_side_by_side():
    df = ruler_table([rec("cpu-ref", 1), rec("cpu-smoke", 2, status="aborted", reason="server died\nlog")],
                     ["cpu-smoke", "cpu-ref"])
    assert list(df.columns) == ["Task", "Length", "cpu-smoke", "cpu-ref"]
    assert df.to_dict("records") == [
        {"Task": "ruler_vt", "Length": 1024, "cpu-smoke": "2/2, score 1.00", "cpu-ref": "1/2, score 0.50"},
        {"Task": "ruler_vt", "Length": 4032, "cpu-smoke": "0/2, score 0.25, 1 request error(s)",
         "cpu-ref": "0/2, score 0.25, 1 request error(s)"},
        {"Task": "all", "Length": "", "cpu-smoke": "2/4, 1 request error(s) (aborted: server died)",
         "cpu-ref": "1/4, 1 request error(s)"}]


def test_no_ruler_records_is_an_empty_table():
    assert ruler_table([], ["a"]).empty
