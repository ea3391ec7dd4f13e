import pytest

from harness.records.schema import KvCapacityRecord, ServerRecord
from harness.report.tables import human_tokens, kv_capacity_table, to_markdown


def test_human_tokens_matches_seed_style():
    assert human_tokens(1_933_000) == "1.933M" and human_tokens(19_752_000) == "19.752M"
    assert human_tokens(4_500) == "4.5k" and human_tokens(12) == "12"


def test_kv_table_shows_failed_arm_with_reason():
    records = [
        ServerRecord(run_id="r", arm="tp8", suite="server", status="up", backends=["FLASHMLA"]),
        KvCapacityRecord(run_id="r", arm="tp8", suite="kv_capacity", device="GPU", tokens=1_933_000,
                         gib_per_worker=61.5, tp=8, dcp=1, source_line="x"),
        ServerRecord(run_id="r", arm="dcp8", suite="server", status="failed", reason="arm 'dcp8': server exited with code 1\nlog..."),
    ]
    md = to_markdown(kv_capacity_table(records, ["tp8", "dcp8"]))
    lines = md.splitlines()
    assert lines[0].startswith("| Arm") and "| tp8 " in lines[2] and "1.933M" in lines[2] and "61.50" in lines[2]
    assert "server failed: arm 'dcp8': server exited with code 1" in lines[3]


def lp(arm, conc, tpot_ms, kv, mem=None, failed=0, status="complete"):
    from harness.records.schema import LongPrefixRecord, Summary, Usage

    p50, p90, p99 = (x / 1e3 for x in tpot_ms)
    tpot = Summary(n=8, mean=p50, p50=p50, p90=p90, p99=p99)
    ttft = Summary(n=8, mean=1.5, p50=1.5, p90=2.0, p99=2.1)
    return LongPrefixRecord(run_id="r", arm=arm, suite="long_prefix", workload="long_prefix_120k", prompts_sha="x",
                            concurrency=conc, status=status, requests=8, failed=failed, ttft=ttft, tpot=tpot,
                            itl=tpot, e2e=ttft, kv_usage=Usage(mean=kv[0], peak=kv[1], n=10),
                            gpu_memory_mib=mem, samples_path="s")


def test_performance_table_in_the_seed_shape():
    from harness.records.schema import Usage
    from harness.report.tables import performance_table

    records = [lp("dcp8", 1, (10.544, 10.574, 10.597), (0.0064, 0.0110)),
               lp("tp8", 1, (13.806, 13.831, 13.857), (0.0493, 0.0717), {"0": Usage(mean=70 * 1024, peak=72 * 1024, n=3)}),
               lp("dcp8", 2, (11.828, 19.437, 27.562), (0.0130, 0.0237), failed=1, status="aborted")]
    md = to_markdown(performance_table(records, ["tp8", "dcp8"])).splitlines()
    assert md[0].split("|")[1:6] == [" Arm   ", " Conc   ", " TPOT p50/p90/p99        ", " HBM use mean/peak   ", " TTFT p50   "]
    assert "| tp8   | c1     | 13.806/13.831/13.857 ms | 4.93%/7.17%" in md[2] and "70.00/72.00 GiB" in md[2]
    assert "| dcp8  | c1     | 10.544/10.574/10.597 ms | 0.64%/1.10%" in md[3] and "| n/a " in md[3]
    assert "| dcp8  | c2     | 11.828/19.437/27.562 ms | 1.30%/2.37%" in md[4] and "1/8 (aborted)" in md[4]
    assert all("| token ids (excl. tokenization) |" in row for row in md[2:])


def test_performance_table_says_which_ttft_it_shows():
    from harness.report.tables import performance_table

    text = lp("tp8", 1, (13.8, 13.9, 14.0), (0.01, 0.02)).model_copy(update={"prompt_basis": "text"})
    rows = performance_table([text], ["tp8"]).to_dict("records")
    assert rows[0]["TTFT p50"] == "1500.0 ms" and rows[0]["TTFT basis"] == "text (incl. tokenization)"


def refcheck(passed=True, status="complete", first=None, drift=3.1e-3, cached=256.0):
    from harness.records.schema import ReferenceCheckRecord

    return ReferenceCheckRecord(run_id="r", arm="cpu-smoke", suite="prefix_reuse", check="prefix_reuse",
                                reference="cpu-ref", reference_key="k", passed=passed, detail="d", requests=8,
                                exact_matches=8 if first is None else 6, first_divergence_min=first, max_drift=drift,
                                nonfinite=0, drift_limit=1e-2, cached_tokens_proven=cached, status=status)


def test_reference_checks_table_columns_and_values():
    from harness.report.tables import reference_checks_table

    md = to_markdown(reference_checks_table([refcheck(), refcheck(False, first=17, drift=None, cached=None),
                                             refcheck(False, status="aborted")])).splitlines()
    assert [c.strip() for c in md[0].split("|")[1:-1]] == [
        "Arm vs reference", "Check", "Verdict", "Requests", "Exact match", "First divergence", "Max drift",
        "Cached tokens proven"]
    assert [c.strip() for c in md[2].split("|")[1:-1]] == [
        "cpu-smoke vs cpu-ref", "prefix_reuse", "PASS", "8", "8/8", "none", "3.1e-03 / limit 0.01", "256"]
    assert [c.strip() for c in md[3].split("|")[1:-1]][2:] == ["FAIL", "8", "6/8", "token 17", "n/a / limit 0.01", "n/a"]
    assert "| aborted " in md[4]
    gpu = refcheck().model_copy(update={"exact_matches": 6, "tie_flips": 2, "drift_limit": 0.25, "max_drift": 0.19})
    row = [c.strip() for c in to_markdown(reference_checks_table([gpu])).splitlines()[2].split("|")[1:-1]]
    assert row[4:7] == ["6/8 (+2 tie flips)", "none", "1.9e-01 / limit 0.25"]


def test_reference_checks_and_gates_tables_without_records_say_suite_not_run():
    from harness.report.tables import gates_table, reference_checks_table

    assert to_markdown(reference_checks_table([])) == "_(no results: suite not run)_"
    assert to_markdown(gates_table([])) == "_(no results: suite not run)_"


def test_gates_table_verdict_per_gate():
    from harness.judge.gates import GateResult
    from harness.records.schema import GateRecord
    from harness.report.tables import gates_table

    records = [GateRecord(run_id="r", arm="dcp8", suite="gsm8k", gate="gsm8k_paired_accuracy", reference="tp8",
                          passed=False, detail="dcp8 is less accurate than tp8: 9 vs 1 (p = 0.0215 < 0.05)\nmore"),
               GateRecord(run_id="r", arm="dcp8", suite="long_prefix", gate="long_prefix_tpot_p50", reference="tp8",
                          passed=True, detail="TPOT p50 within 0.05 of tp8 at every concurrency")]
    rows = gates_table([GateResult.from_record(r) for r in records]).to_dict("records")
    assert rows[0] == {"Gate": "gsm8k_paired_accuracy", "Arm vs reference": "dcp8 vs tp8", "Verdict": "FAIL",
                       "Detail": "dcp8 is less accurate than tp8: 9 vs 1 (p = 0.0215 < 0.05)"}
    assert rows[1]["Verdict"] == "PASS"


def test_build_tables_titles_in_pr_order():
    from harness.report.tables import build_tables

    assert [t for t, _ in build_tables([], [])] == ["Accuracy", "RULER", "Performance", "Cold start", "KV capacity",
                                                      "Reference checks", "Long context", "Batch invariance", "Capacity", "Timing metrics", "DCP op conformance", "Spec decode", "Gates", "Checks",
                                                      "Servers"]


def test_checks_table_shows_what_failed_not_where():
    from harness.report.tables import failure_summary

    longrepr = ("def test_graph_replay(...):\n>       assert rec.passed, (...)\n"
                "E       AssertionError: graph_replay on 'gpu-mla' vs 'gpu-mla-ref':\n"
                "E         request r7b33-13 [round 7 (batch 33)]: generated token 8 differs\n\n"
                "suites/test_graph_replay.py:26: AssertionError")
    assert failure_summary(longrepr) == "AssertionError: graph_replay on 'gpu-mla' vs 'gpu-mla-ref':"
    assert failure_summary("arm 'x': server exited with code 1\nlog tail") == "arm 'x': server exited with code 1"
    assert failure_summary("") == ""


# A skip as runs recorded it: the repr of pytest's tuple (before 2026-11-30), "Skipped: why", and the reason alone.
SKIP_FORMS = ["('/w/suites/test_graph_replay.py', 33, \"Skipped: arm 'cpu-smoke' names no eager_variant\")",
              "Skipped: arm 'cpu-smoke' names no eager_variant", "arm 'cpu-smoke' names no eager_variant"]


def skipped(message: str):
    from harness.records.schema import OutcomeRecord

    return OutcomeRecord(run_id="r", arm="cpu-smoke", suite="graph_replay", outcome="skipped", message=message,
                         test="suites/test_graph_replay.py::test_graph_replay_vs_eager", duration_s=0.0)


@pytest.mark.parametrize("message", SKIP_FORMS)
def test_a_skip_reads_skipped_once_with_its_reason(message):
    from harness.report.completeness import aborted
    from harness.report.tables import outcomes_table, skip_why

    assert skip_why(message) == "arm 'cpu-smoke' names no eager_variant"
    assert outcomes_table([skipped(message)])["Detail"].tolist() == ["arm 'cpu-smoke' names no eager_variant"]
    assert aborted([skipped(message)]) == ["graph_replay x cpu-smoke: skipped: arm 'cpu-smoke' names no eager_variant"]


def test_a_skip_without_a_reason_says_so():
    from harness.report.tables import skip_why

    assert skip_why("") == skip_why("Skipped: ") == "no reason given"
    assert skip_why("(not a tuple") == "(not a tuple"


def test_accuracy_table_seed_shape():
    from harness.records.schema import FilterScore, Gsm8kRecord
    from harness.report.tables import accuracy_table, to_markdown

    def rec(arm, correct, em):
        return Gsm8kRecord(run_id="r", arm=arm, suite="gsm8k", workload="gsm8k_full", task="gsm8k", data_files=None,
                           lm_eval_version="0.4.13", task_hash="h", num_fewshot=5, limit=None, n=1319,
                           scores={"strict-match": FilterScore(exact_match=em, stderr=0.0053, correct=correct),
                                   "flexible-extract": FilterScore(exact_match=em, stderr=0.005, correct=correct)},
                           request_errors=0, invalid=3, status="complete", wall_s=1.0, num_concurrent=32,
                           samples_path="s")

    md = to_markdown(accuracy_table([rec("dcp8", 1279, 0.9697), rec("tp8", 1269, 0.9621)], ["tp8", "dcp8"]))
    lines = md.splitlines()
    assert lines[0].startswith("| Arm   | exact_match   | stderr   | Correct/N   |   Request errors |")
    assert "| tp8   | 96.21%        | ±0.53    | 1269/1319   |                0 |" in lines[2]
    assert "| dcp8  | 96.97%" in lines[3] and "1279/1319" in lines[3]


def test_dcp_op_conformance_table_renders_from_results_jsonl(tmp_path):
    import json
    from pathlib import Path

    from harness.judge.dcp_ops import judge_dcp_ops
    from harness.records.results import ResultsWriter
    from harness.records.schema import DcpOpsRecord
    from harness.report.rundata import load_results
    from harness.report.tables import build_tables, dcp_ops_table

    data = Path(__file__).resolve().parents[1] / "judge" / "data"
    writer = ResultsWriter(tmp_path / "results.jsonl")
    for arm, name in (("gpu-dcp2", "dcp_ops_lse_offset_1e-2.json"), ("gpu-tp2", None)):
        fields = (judge_dcp_ops(json.loads((data / name).read_text()), 2, "cuda") if name
                  else judge_dcp_ops(None, 2, "cuda", "the runner wrote no dcp_ops.json"))
        writer.append(DcpOpsRecord(run_id="r", arm=arm, suite="dcp_ops", **fields))
    records = load_results(tmp_path / "results.jsonl").records
    df = dcp_ops_table(records, ["gpu-dcp2", "gpu-tp2"])
    assert list(df.columns) == ["Arm", "Op", "Geometry", "dtype", "Max abs err", "Max rel err", "Limit", "Verdict"]
    assert len(df) == 35 and (df["Verdict"] == "FAIL").sum() == 15
    first = df.iloc[0]
    assert (first["Op"], first["dtype"], first["Max abs err"], first["Limit"], first["Verdict"]) == (
        "cp_lse_ag_out_rs", "bfloat16", "0.01", "2.01e-05", "FAIL")
    assert "tokens=7 heads=16 head_dim=512 pattern=random" in first["Geometry"]
    assert df.iloc[-1]["Verdict"] == "FAIL: no data: the runner wrote no dcp_ops.json"
    md = to_markdown(dict(build_tables(records, ["gpu-dcp2", "gpu-tp2"]))["DCP op conformance"])
    assert md.splitlines()[0].startswith("| Arm") and "| gpu-tp2 " in md.splitlines()[-1]


def test_completeness_lists_a_missing_or_dataless_op_suite():
    from harness.judge.dcp_ops import judge_dcp_ops
    from harness.records.manifest import parse_manifest
    from harness.records.schema import DcpOpsRecord
    from harness.report.completeness import gaps

    info = parse_manifest({"arms": {"gpu-dcp2": {}, "gpu-tp2": {}}, "suites": ["dcp_ops"], "per_arm_suites": [],
                           "finished": "1"})
    assert gaps(info, [], ["gpu-dcp2", "gpu-tp2"]) == [
        "dcp_ops x gpu-dcp2: no record: not run (the run stopped before it, or the suite was not selected)"]
    rec = DcpOpsRecord(run_id="r", arm="gpu-dcp2", suite="dcp_ops", **judge_dcp_ops(None, 2, "cuda", "killed"))
    assert "dcp_ops x gpu-dcp2: no data: killed" in gaps(info, [rec], ["gpu-dcp2", "gpu-tp2"])


def test_spec_decode_table_shows_acceptance_speedup_and_the_gates_verdict():
    from reportrun import healthy, spec

    from harness.config.thresholds import SpecDecodeGates
    from harness.judge.spec_decode_gates import spec_decode_gates
    from harness.report.tables import spec_decode_table

    records = healthy()
    df = spec_decode_table(records, ["cpu-spec", "cpu-ref"], spec_decode_gates(records, "cpu-spec", "cpu-ref",
                                                                               SpecDecodeGates()))
    (row,) = df.to_dict("records")
    assert (row["Method"], row["k"], row["Acceptance length"]) == ("ngram", 3, "2.5")
    assert row["Per-position acceptance"] == "0.70 / 0.50 / 0.30" and row["Speed-up"] == "2.00x"
    assert row["TPOT p50"] == "2.00 ms vs 4.00 ms" and row["Verdict"] == "PASS"
    assert row["Accepted vs replay"] == "150/100 vs 148-152/100"
    off = [spec("cpu-spec", accepted=120.0), *records[1:]]
    (row,) = spec_decode_table(off, ["cpu-spec", "cpu-ref"], spec_decode_gates(off, "cpu-spec", "cpu-ref",
                                                                               SpecDecodeGates())).to_dict("records")
    assert row["Accepted vs replay"] == "120/100 vs 148-152/100" and row["Verdict"] == "FAIL: acceptance_length"
    bad = [spec("cpu-spec", accepted_per_pos=[100.0] * 3, position_rates=[1.0] * 3), *records[1:]]
    (row,) = spec_decode_table(bad, ["cpu-spec", "cpu-ref"], spec_decode_gates(bad, "cpu-spec", "cpu-ref",
                                                                               SpecDecodeGates())).to_dict("records")
    assert row["Verdict"] == "FAIL: collapse"



def test_performance_table_and_headline_say_timing_invalid_for_a_buffered_level():
    from harness.records.schema import LongPrefixRecord, Summary, buffered_reason
    from harness.report.headline import tpot_lines
    from harness.report.tables import performance_table
    from tests.judge.test_gates import outputs

    clean = lp("cpu-ref", 1, (4.1, 4.3, 4.4), (0.1, 0.2))
    none = Summary.of([])
    # as measure.long_prefix.level_fields writes a level with 3 of its 8 requests buffered
    buffered = clean.model_copy(update={"arm": "cpu-smoke", "ttft": none, "tpot": none, "itl": none,
                                        "tpot_samples_s": [], "buffered_requests": 3,
                                        "timing_invalid": buffered_reason(3, 8)})
    reason = "timing invalid (buffered stream): 3/8 requests' output arrived at once"
    rows = {r["Arm"]: r for r in performance_table([buffered, clean], ["cpu-smoke", "cpu-ref"]).to_dict("records")}
    row = rows["cpu-smoke"]
    assert row["TPOT p50/p90/p99"] == reason
    assert row["TTFT p50"] == row["ITL p50"] == "timing invalid (buffered stream)" and row["E2E p50"] == "1500.0 ms"
    assert rows["cpu-ref"]["TPOT p50/p90/p99"] == "4.100/4.300/4.400 ms"
    matched = outputs("cpu-smoke", "cpu-ref")  # the timed outputs matched: only the timing is void
    assert tpot_lines([matched, buffered, clean], "cpu-smoke", "cpu-ref") == [
        f"TPOT p50 c1: no data for cpu-smoke ({reason})"]
    # a record written before buffered_requests still holds the buffered figures: its per-request TPOTs mark it
    old = LongPrefixRecord(**{**clean.model_dump(exclude={"kind"}), "arm": "cpu-smoke",
                              "tpot_samples_s": [1.87e-5, 1.89e-5, 2.01e-5, 2.1e-5, 2.2e-5, 2.3e-5, 2.4e-5, 2.39e-3]})
    row = performance_table([old], ["cpu-smoke"]).to_dict("records")[0]
    assert row["TPOT p50/p90/p99"] == reason.replace("3/8", "7/8") and row["TTFT p50"] == "timing invalid (buffered stream)"


def test_a_cold_start_with_no_data_reads_no_data_never_ok():
    from harness.records.schema import ColdStartRecord
    from harness.report.tables import cold_start_table

    common = dict(run_id="r", suite="long_prefix", workload="w", ttft_s=0.4, factor_limit=2.0, flagged=False)
    why = "c1: timing invalid (buffered stream): 1/4 requests' output arrived at once"
    records = [ColdStartRecord(arm="a", tpot_s=0.005, steady_tpot_p50_s=None, no_data=why, **common),
               ColdStartRecord(arm="b", tpot_s=None, steady_tpot_p50_s=0.005, **common),  # an older record
               ColdStartRecord(arm="c", tpot_s=0.005, steady_tpot_p50_s=0.005, **common)]
    assert cold_start_table(records, ["a", "b", "c"])["Flag"].tolist() == [f"no data: {why}", "no data", "ok"]
