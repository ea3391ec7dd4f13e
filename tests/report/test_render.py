"""Rendering a run directory: table files, report.html, annotation, partial runs, bad input, copied runs."""

from __future__ import annotations

import json
import re
import shutil

from reportrun import make_run

from harness.report.render import annotation, render_run
from harness.report.rundata import resolve_path

TABLES = ["accuracy", "performance", "cold_start", "kv_capacity", "reference_checks", "gates", "checks", "servers"]


def test_complete_run_renders_every_table_in_three_formats_and_a_self_contained_page(tmp_path):
    run = make_run(tmp_path)
    rendered = render_run(run)
    for name in TABLES:
        assert (run / "tables" / f"{name}.md").read_text().startswith("| ")
        assert (run / "tables" / f"{name}.csv").read_text().count("\n") >= 2
        assert isinstance(json.loads((run / "tables" / f"{name}.json").read_text()), list)
    assert "| cpu-smoke | c1 " in rendered.markdown and "Missing" not in rendered.markdown
    html = rendered.html_path.read_text()
    assert re.findall(r'src="([^"]{0,22})', html) == ["data:image/png;base64,"] * 3  # every plot embedded
    assert "http://" not in html and "https://" not in html and "<link" not in html and "<script" not in html
    assert "Nothing missing" in html and "None: every line was read." in html
    assert "PASSED (exit code 0)" in html and "Test CPU x 2 (no GPU)" in html and "sha256:abc123" in html


def test_report_html_redacts_secrets_recorded_in_argv_and_env(tmp_path):
    html = render_run(make_run(tmp_path)).html_path.read_text()
    assert "s3cret" not in html
    assert "--api-key &lt;redacted&gt;" in html and "VLLM_API_KEY=&lt;redacted&gt;" in html
    assert "OMP_NUM_THREADS=2" in html


def test_copied_run_resolves_absolute_paths_relative_to_the_run_dir(tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.move(str(make_run(tmp_path / "orig")), moved / "r1")  # records still name tmp/orig/r1/...
    records = (moved / "r1" / "results.jsonl").read_text()
    assert str(tmp_path / "orig" / "r1") in records
    rendered = render_run(moved / "r1")
    assert "not found" not in rendered.markdown
    assert rendered.html_path.read_text().count("data:image/png;base64,") == 3


def test_missing_samples_file_is_named_and_the_report_still_renders(tmp_path):
    run = make_run(tmp_path)
    (run / "cpu-ref" / "long_prefix_c2.jsonl").unlink()
    rendered = render_run(run)
    assert "TPOT samples of cpu-ref c2: file '" in rendered.markdown and "long_prefix_c2.jsonl' not found" \
        in rendered.markdown
    html = rendered.html_path.read_text()
    assert "long_prefix_c2.jsonl&#39; not found" in html and html.count("data:image/png;base64,") == 3


def test_bad_lines_are_listed_precisely_and_the_rest_renders(tmp_path):
    run = make_run(tmp_path)
    with (run / "results.jsonl").open("a") as f:
        f.write(json.dumps({"schema_version": 7, "kind": "gsm8k"}) + "\n")
        f.write(json.dumps({"schema_version": 1, "kind": "draft_tree", "arm": "x"}) + "\n")
        f.write('{"schema_version": 1, "kind": "outc')
    rendered = render_run(run)
    html = rendered.html_path.read_text()
    for text in ("schema_version 7: this harness reads results.jsonl record version 1", "unknown record kind &#39;draft_tree&#39;",
                 "truncated last line (the run was interrupted)"):
        assert text in html
    assert "results.jsonl:" in rendered.markdown and "| cpu-smoke | c1 " in rendered.markdown


def test_interrupted_partial_run_marks_what_is_missing_and_why(tmp_path):
    run = make_run(tmp_path, suites=["kv_capacity", "long_prefix"], exit_code=130)
    rendered = render_run(run)
    assert "gsm8k x cpu-smoke: no record: not run" in rendered.markdown
    assert "the run was interrupted (exit code 130, SIGINT)" in rendered.markdown
    assert "_(no results: suite not run)_" in (run / "tables" / "accuracy.md").read_text()
    html = rendered.html_path.read_text()
    assert "INTERRUPTED (exit code 130)" in html and "gsm8k x cpu-ref: no record" in html


def test_run_without_end_time_is_incomplete(tmp_path):
    rendered = render_run(make_run(tmp_path, exit_code=None))
    assert rendered.exit_code is None
    assert "run.json has no end time" in rendered.markdown
    html = rendered.html_path.read_text()
    assert "INCOMPLETE" in html
    assert "<th>Exit code</th><td>not recorded (run interrupted or still running)</td>" in html


def test_provenance_states_an_exit_code_that_was_never_recorded():
    from harness.report.provenance import summarize_provenance

    assert summarize_provenance(None, [], None)["summary"]["Exit code"] == "not recorded (run interrupted or still running)"
    assert summarize_provenance(None, [], 0)["summary"]["Exit code"] == "0"


def test_failing_gate_shows_fail_in_gates_table_and_verdict(tmp_path):
    rendered = render_run(make_run(tmp_path, exit_code=1, candidate_tpot_scale=2.0))
    gates = (tmp_path / "r1" / "tables" / "gates.md").read_text()
    assert ("| long_prefix_tpot_p50  | cpu-smoke vs cpu-ref | FAIL      | c1: cpu-smoke TPOT p50 10.700 ms > cpu-ref "
            "5.350 ms x (1 + 0.5) = 8.025 ms; c2: cpu-smoke TPOT p50 21.400 ms > cpu-ref 10.700 ms x") in gates
    assert 'class="verdict bad">FAILED (exit code 1)' in rendered.html_path.read_text()


def test_resolve_path_prefers_recorded_then_run_relative(tmp_path):
    run = make_run(tmp_path)
    assert resolve_path(run, str(run / "cpu-ref" / "long_prefix_c1.jsonl")) == run / "cpu-ref" / "long_prefix_c1.jsonl"
    assert resolve_path(run, "/gone/host/reports/r1/cpu-ref/long_prefix_c1.jsonl") == run / "cpu-ref" / "long_prefix_c1.jsonl"
    assert resolve_path(run, "cpu-ref/long_prefix_c1.jsonl") == run / "cpu-ref" / "long_prefix_c1.jsonl"
    assert resolve_path(run, "/gone/host/reports/r1/cpu-ref/nothing.jsonl") is None
    # brought back from a GPU machine under another name: reports/h200-run/<arm>/x.jsonl -> <run>/<arm>/x.jsonl
    assert resolve_path(run, "/work/main/reports/h200-run/cpu-ref/long_prefix_c1.jsonl") == (
        run / "cpu-ref" / "long_prefix_c1.jsonl")
    assert resolve_path(run, None) is None


def test_annotation_carries_regressions_and_the_report_path(tmp_path):
    text = annotation([("cpu-smoke", "cpu-ref")], 1, "### Accuracy\n", ["cpu-smoke c1: TPOT p50 +30%"],
                      tmp_path / "report.html")
    assert text.startswith("## DCP qualification FAILED: cpu-smoke vs cpu-ref (exit code 1)")
    assert "- **baseline regression**: cpu-smoke c1: TPOT p50 +30%" in text
    assert f"[report.html]({tmp_path / 'report.html'})" in text
    clean = annotation([("cpu-smoke", "cpu-ref")], 0, "")
    assert clean.startswith("## DCP qualification PASSED") and "regression" not in clean


def test_cli_report_rerenders_a_run_dir_and_writes_the_annotation(tmp_path, capsys):
    from harness.cli import main

    run = make_run(tmp_path)
    assert main(["report", "--run", str(run)]) == 0
    out = capsys.readouterr().out
    assert "### Performance" in out and f"report: {run / 'report.html'}" in out
    assert (run / "annotation.md").read_text().startswith("## DCP qualification PASSED: cpu-smoke vs cpu-ref")


def test_candidate_only_suites_do_not_expect_the_reference_arm(tmp_path):
    from harness.records.schema import OutcomeRecord
    from harness.report.completeness import missing_outcomes

    got = [OutcomeRecord(run_id="r", arm="cpu-smoke", suite=s, test=f"t_{s}", outcome="passed")
           for s in ("gsm8k", "prefix_reuse")]
    arms, suites = ["cpu-smoke", "cpu-ref"], ["gsm8k", "prefix_reuse"]
    assert missing_outcomes(got, arms, suites, per_arm=["gsm8k"]) == [
        "gsm8k x cpu-ref: no record: not run (the run stopped before it, or the suite was not selected)"]
    assert len(missing_outcomes(got, arms, suites, per_arm=None)) == 2  # older run.json: every arm expected
    assert missing_outcomes([], arms, ["prefix_reuse"], per_arm=["gsm8k"])[0].startswith("prefix_reuse x cpu-smoke")


def test_an_eager_variant_launched_only_for_outputs_is_not_expected_to_run_suites():
    from harness.records.manifest import parse_manifest
    from harness.records.schema import OutcomeRecord, ServerRecord
    from harness.report.completeness import gaps

    got = [OutcomeRecord(run_id="r", arm=a, suite="kv_capacity", test="t", outcome="passed")
           for a in ("gpu-mla", "gpu-mla-ref")]
    got.append(ServerRecord(run_id="r", arm="gpu-mla-eager", suite="server", status="up"))
    info = {"arms": {"gpu-mla": {}, "gpu-mla-ref": {}}, "suites": ["kv_capacity"], "per_arm_suites": ["kv_capacity"],
            "finished": "x", "exit_code": 0}
    got_gaps = gaps(parse_manifest(info), got, ["gpu-mla", "gpu-mla-ref", "gpu-mla-eager"])
    assert not [g for g in got_gaps if "gpu-mla-eager" in g]
    info["arms"]["gpu-mla-eager"] = {}  # were it an arm of the run, its missing suite would be listed
    assert [g for g in gaps(parse_manifest(info), got, ["gpu-mla", "gpu-mla-ref", "gpu-mla-eager"]) if "gpu-mla-eager" in g]


def test_run_info_marks_per_arm_suites_from_the_catalogue():
    from harness.config.suites import per_arm_suites

    assert per_arm_suites(["gsm8k", "kv_capacity", "long_prefix", "prefix_reuse", "graph_replay", "nope"]) == [
        "gsm8k", "kv_capacity", "long_prefix"]


def test_an_arm_with_only_a_server_record_gets_no_table_rows(tmp_path):
    from harness.records.manifest import parse_manifest
    from harness.records.schema import KvCapacityRecord, ServerRecord
    from harness.report.rundata import RunData
    from harness.report.tables import kv_capacity_table

    recs = [ServerRecord(run_id="r", arm=a, suite="server", status="up") for a in ("gpu-mla", "gpu-mla-eager")]
    recs.append(KvCapacityRecord(run_id="r", arm="gpu-mla", suite="kv_capacity", device="GPU", tokens=5,
                                 gib_per_worker=1.0, tp=1, dcp=1, source_line="x"))
    recs.append(KvCapacityRecord(run_id="r", arm="other", suite="kv_capacity", device="GPU", tokens=7,
                                 gib_per_worker=1.0, tp=1, dcp=1, source_line="x"))
    run = RunData(tmp_path, parse_manifest({"arms": {"gpu-mla": {}, "gpu-mla-ref": {}}}), recs, [])
    assert run.arm_order == ["gpu-mla", "gpu-mla-ref", "other"]  # a measured arm outside run.json still shows
    assert "gpu-mla-eager" not in kv_capacity_table(run.records, run.arm_order)["Arm"].tolist()


def test_gates_re_rendered_from_the_file_equal_the_live_verdicts(tmp_path):
    """What the comparison tests record during a run (each gate computed on the records read back) is exactly the
    Gates table `harness report` recomputes later from the stored run alone."""
    from harness.config.suites import BY_NAME
    from harness.config.thresholds import load_gates
    from harness.judge.catalogue_gate import catalogue_gates
    from harness.judge.gates import GateResult, tpot_gate
    from harness.records.results import ResultsWriter, read_results
    from harness.records.schema import GateRecord
    from harness.report.tables import gates_table

    run = make_run(tmp_path, candidate_tpot_scale=1.7, right={"cpu-smoke": [True] * 20 + [False] * 20,
                                                             "cpu-ref": [True] * 32 + [False] * 8})
    results = run / "results.jsonl"
    limits = load_gates("cpu-smoke")
    for live in (tpot_gate(read_results(results)[0], "cpu-smoke", "cpu-ref", limits.long_prefix),
                 *catalogue_gates(BY_NAME["gsm8k"], read_results(results)[0], "cpu-smoke", "cpu-ref", limits)):
        ResultsWriter(results).append(GateRecord(run_id="r1", suite=live.suite, **live.record_fields()))
    recorded = [GateResult.from_record(r) for r in read_results(results)[0] if isinstance(r, GateRecord)]
    assert [g.passed for g in recorded] == [False, False]  # a failing run: both gates have something to say
    render_run(run)
    assert json.loads((run / "tables" / "gates.json").read_text()) == gates_table(recorded).to_dict("records")


def test_a_selected_suite_without_records_reads_fail_no_data_in_the_gates_table(tmp_path):
    run = make_run(tmp_path, suites=["gsm8k", "kv_capacity"])  # run.json still lists long_prefix
    rows = json.loads((render_run(run) and run / "tables" / "gates.json").read_text())
    assert rows[0] == {"Gate": "long_prefix_tpot_p50", "Arm vs reference": "cpu-smoke vs cpu-ref", "Verdict": "FAIL",
                       "Detail": "no data: no long_prefix record for cpu-smoke; no data: no long_prefix record for "
                                 "cpu-ref"}
    assert rows[1]["Gate"] == "gsm8k_paired_accuracy" and rows[1]["Verdict"] == "PASS"


def test_capacity_table_judges_with_the_slo_the_run_recorded_not_todays_gates_yaml(tmp_path):
    """A re-rendered report reads each candidate's capacity SLO from run.json's pairs; gates.yaml may have changed
    since (here: cpu-smoke-kvcap's 300 ms TPOT p99 today, 10 ms recorded by the run). Without a recorded section it
    falls back to today's gates.yaml."""
    from harness.config.thresholds import load_gates
    from harness.records.schema import CapacityRecord, ReferenceCheckRecord, Summary

    def level(arm: str, c: int) -> CapacityRecord:
        n, tpot = 2 * c, 0.05  # 50 ms: within today's 300 ms, past the recorded 10 ms
        return CapacityRecord(run_id="r", arm=arm, suite="capacity", workload="w", prompts_sha="p", concurrency=c,
                              status="complete", requests=n, planned=n, failed=0, duration_s=2.0, output_tokens=64 * n,
                              output_tokens_per_s=30.0 * c, requests_per_s=n / 2, gpus=1,
                              ttft=Summary.of([0.1] * n), tpot=Summary.of([tpot] * n),
                              ttft_samples_s=[0.1] * n, tpot_samples_s=[tpot] * n, samples_path="x")

    cand, ref = "cpu-smoke-kvcap", "cpu-ref-kvcap"
    records = [level(a, c) for a in (ref, cand) for c in (1, 2)]
    records += [ReferenceCheckRecord(run_id="r", arm=cand, suite="capacity", check=f"capacity_outputs_c{c}",
                                     reference=ref, reference_key="k", passed=True, detail="2/2 exact", requests=2,
                                     exact_matches=2, first_divergence_min=None, max_drift=0.0, nonfinite=0,
                                     drift_limit=0.01) for c in (1, 2)]
    today = load_gates(cand)
    assert today.capacity.slo_tpot_p99_ms == 300
    recorded = today.model_copy(update={"capacity": today.capacity.model_copy(update={"slo_tpot_p99_ms": 10})})
    for name, gates, verdict in [("recorded", recorded.model_dump(mode="json"), "broken"), ("legacy", None, "meets")]:
        run = tmp_path / name
        run.mkdir()
        (run / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
        (run / "run.json").write_text(json.dumps({"arms": {cand: {}, ref: {}}, "suites": ["capacity"],
                                                  "pairs": [{"candidate": cand, "reference": ref, "gates": gates}],
                                                  "exit_code": 0}))
        render_run(run)
        rows = json.loads((run / "tables" / "capacity.json").read_text())
        assert [r["SLO"].split(":")[0] for r in rows] == [verdict] * 4, (name, rows)


def test_a_column_naming_one_pair_for_every_row_moves_to_the_pages_caption():
    import pandas as pd

    from harness.report.html import breakable, table_view

    one = pd.DataFrame({"Arm vs reference": ["cpu-smoke vs cpu-ref"] * 2, "Check": ["graph_replay", "multi_turn"]})
    view = table_view("Reference checks", one)
    assert view["whose"] == "cpu-smoke vs cpu-ref" and view["columns"] == ["Check"]
    assert view["rows"] == [["graph_replay"], ["multi_turn"]]
    mixed = pd.DataFrame({"Arm vs reference": ["cpu-smoke vs cpu-ref", "cpu-fast vs cpu-ref"], "Check": ["a", "a"]})
    assert table_view("Reference checks", mixed)["columns"] == ["Arm vs reference", "Check"]  # it tells rows apart
    arms = pd.DataFrame({"Arm": ["cpu-smoke"], "Batch": [2]})  # one row: nothing repeats
    assert table_view("Batch invariance", arms)["whose"] == ""
    assert breakable("<b>p50/p90 long_context") == "&lt;b&gt;p50/<wbr>p90 long_<wbr>context"
