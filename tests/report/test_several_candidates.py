"""The report of a run with two candidates against one shared reference (`qualify --arms`): one row per arm in the
per-arm tables, each candidate's gates and reference checks against its own reference, a verdict line per candidate,
and a failing gate of one candidate fails the run while the other's rows stay."""

from __future__ import annotations

import json
from pathlib import Path

from reportrun import gsm8k, long_prefix, outputs_check

from harness.config.thresholds import load_gates
from harness.records.results import ResultsWriter
from harness.records.schema import KvCapacityRecord, OutcomeRecord, ReferenceCheckRecord, ServerRecord
from harness.report.render import render_run

ARMS = ("cpu-smoke", "cpu-fast", "cpu-ref")


def make_run(root: Path, fast_right: list[bool]) -> Path:
    """cpu-smoke and cpu-fast (TPOT halved, GSM8K answers `fast_right`) against cpu-ref, as run.json's pairs say."""
    run = root / "several"
    w = ResultsWriter(run / "results.jsonl")
    for arm in ARMS:
        w.append(ServerRecord(run_id="several", arm=arm, suite="server", status="up", vllm_version="0.32.0"))
        w.append(KvCapacityRecord(run_id="several", arm=arm, suite="kv_capacity", device="CPU", tokens=100_000,
                                  gib_per_worker=1.5, tp=1, dcp=1, source_line="x"))
        scale = 0.5 if arm == "cpu-fast" else 1.0
        for conc in (1, 2):
            long_prefix(w, run, arm, conc, [scale * (5.0 + 0.1 * i) * conc for i in range(8)])
        gsm8k(w, run, arm, fast_right if arm == "cpu-fast" else [True] * 30 + [False] * 10)
        for suite in ("kv_capacity", "long_prefix", "gsm8k"):
            w.append(OutcomeRecord(run_id="several", arm=arm, suite=suite,
                                   test=f"suites/test_{suite}.py::test_{suite}[{arm}]", outcome="passed"))
    for cand in ARMS[:2]:
        w.append(ReferenceCheckRecord(run_id="several", arm=cand, suite="prefix_reuse", check="prefix_reuse",
                                      reference="cpu-ref", reference_key="k", passed=True, detail="ok", requests=8,
                                      exact_matches=8, first_divergence_min=None, max_drift=1e-3, nonfinite=0,
                                      drift_limit=1e-2, cached_tokens_proven=256))
        w.append(outputs_check("several", arm=cand))
    gates = load_gates("cpu-smoke").model_dump(mode="json")
    info = {"harness_version": "0.1.0", "git_commit": "abc", "host": "h", "started": "2026-01-01T00:00:00",
            "argv": ["qualify", "--arms", "cpu-smoke,cpu-fast"], "suites": ["gsm8k", "kv_capacity", "long_prefix"],
            "per_arm_suites": ["gsm8k", "kv_capacity", "long_prefix"], "arms": {a: {} for a in ARMS},
            "workloads": {"long_prefix": {"concurrency": [1, 2], "seed": 0}},
            "pairs": [{"candidate": c, "reference": "cpu-ref", "gates": gates} for c in ARMS[:2]],
            "finished": "2026-01-01T00:05:00", "exit_code": 0, "device": {"kind": "cpu", "cpu": "Test CPU x 2"}}
    (run / "run.json").write_text(json.dumps(info))
    return run


def table(run: Path, name: str) -> list[dict]:
    return json.loads((run / "tables" / f"{name}.json").read_text())


def test_each_arm_once_per_table_and_each_candidate_against_its_reference(tmp_path):
    run = make_run(tmp_path, [True] * 30 + [False] * 10)
    rendered = render_run(run, exit_code=0)
    assert rendered.exit_code == 0
    assert [r["Arm"] for r in table(run, "kv_capacity")] == list(ARMS)
    assert [r["Arm"] for r in table(run, "accuracy")] == list(ARMS)
    assert [(r["Arm"], r["Conc"]) for r in table(run, "performance")] == [(a, c) for c in ("c1", "c2") for a in ARMS]
    assert sorted((r["Arm vs reference"], r["Check"]) for r in table(run, "reference_checks")) == [
        (f"{c} vs cpu-ref", check) for c in ("cpu-fast", "cpu-smoke") for check in ("long_prefix_outputs",
                                                                                    "prefix_reuse")]
    gates = {(r["Gate"], r["Arm vs reference"]): r["Verdict"] for r in table(run, "gates")}
    assert set(gates) == {(g, f"{c} vs cpu-ref") for g in ("long_prefix_tpot_p50", "gsm8k_paired_accuracy")
                          for c in ("cpu-smoke", "cpu-fast")}
    headline = (run / "tables" / "headline.md").read_text().splitlines()
    assert headline[:2] == ["- cpu-smoke vs cpu-ref: PASSED", "- cpu-fast vs cpu-ref: PASSED"]
    assert ("- TPOT p50 c1: cpu-fast 2.675 ms vs cpu-ref 5.350 ms (-50.0%) [timing not enforced for this arm: "
            "gates.yaml enforce_timing false]") in headline
    assert "- Check prefix_reuse cpu-fast vs cpu-ref: PASS (8/8 exact)" in headline
    assert "DCP qualification several: cpu-smoke vs cpu-ref, cpu-fast vs cpu-ref" in (run / "report.html").read_text()
    assert "Missing or incomplete" not in rendered.markdown


def test_one_candidates_failing_gate_fails_the_run_and_keeps_the_others_rows(tmp_path):
    run = make_run(tmp_path, [True] * 10 + [False] * 30)  # cpu-fast: 20 questions lost, none won
    rendered = render_run(run, exit_code=0)
    assert rendered.exit_code == 1  # the verdict agrees with the recomputed Gates table
    gates = {(r["Gate"], r["Arm vs reference"]): r["Verdict"] for r in table(run, "gates")}
    assert gates[("gsm8k_paired_accuracy", "cpu-fast vs cpu-ref")] == "FAIL"
    assert gates[("gsm8k_paired_accuracy", "cpu-smoke vs cpu-ref")] == "PASS"
    headline = (run / "tables" / "headline.md").read_text().splitlines()
    assert headline[:2] == ["- cpu-smoke vs cpu-ref: PASSED",
                            "- cpu-fast vs cpu-ref: FAILED (gate gsm8k_paired_accuracy)"]
    assert [r["Arm"] for r in table(run, "accuracy")] == list(ARMS)


def test_a_run_json_without_pairs_reads_as_its_first_arm_against_the_second(tmp_path):
    from harness.records.manifest import parse_manifest

    def pairs_of(raw: dict) -> list[dict]:  # the pairs run.json's migration gives an unversioned file
        return [p.model_dump() for p in parse_manifest(raw).pairs]

    w = {"long_prefix": {"concurrency": [1, 2]}}
    assert pairs_of({"arms": {"cpu-smoke": {}, "cpu-ref": {}}, "gates": {"x": 1}, "workloads": w}) == [
        {"candidate": "cpu-smoke", "reference": "cpu-ref", "gates": {"x": 1}, "workloads": w}]
    assert pairs_of({"arms": {"cpu-ref": {}}}) == [{"candidate": "cpu-ref", "reference": None, "gates": None,
                                                    "workloads": None}]
    assert pairs_of({}) == []


def test_each_pair_is_held_to_its_own_long_prefix_levels():
    # two candidates with other references and other workloads: the second's c4 was only asked of its own pair
    from harness.records.manifest import parse_manifest
    from harness.records.schema import LongPrefixRecord
    from harness.report.completeness import levels_per_arm, missing_levels

    info = {"arms": {"a": {}, "b": {}, "ra": {}, "rb": {}}, "workloads": {"long_prefix": {"concurrency": [1, 2]}},
            "pairs": [{"candidate": "a", "reference": "ra"},
                      {"candidate": "b", "reference": "rb", "workloads": {"long_prefix": {"concurrency": [1, 4]}}}]}
    levels = levels_per_arm(parse_manifest(info), ["a", "ra", "b", "rb"])
    assert levels == {"a": [1, 2], "ra": [1, 2], "b": [1, 4], "rb": [1, 4]}
    recs = [LongPrefixRecord.model_construct(arm=arm, concurrency=c) for arm, c in
            [("a", 1), ("a", 2), ("ra", 1), ("ra", 2), ("b", 1), ("b", 2), ("rb", 1), ("rb", 4)]]
    assert missing_levels(recs, ["a", "ra", "b", "rb"], levels) == [
        "long_prefix x b: c4 not measured (an earlier level aborted or the run stopped)"]


def test_run_json_records_each_pairs_own_workloads(tmp_path):
    import json

    from harness.admission.record import record_run_start
    from harness.config.arms import load_arm
    from harness.config.armset import ArmSet, Pair
    from harness.config.workloads import workload_for

    arms = [load_arm(n) for n in ("cpu-smoke", "cpu-spec", "cpu-ref")]
    record_run_start(tmp_path, arms, ["qualify"], ["long_prefix"],
                     ArmSet((Pair("cpu-smoke", "cpu-ref"), Pair("cpu-spec", "cpu-ref"))))
    pairs = json.loads((tmp_path / "run.json").read_text())["pairs"]
    for p, arm in zip(pairs, arms[:2], strict=True):
        assert p["workloads"]["long_prefix"]["name"] == workload_for(arm, "long_prefix")
        assert p["workloads"]["long_prefix"]["concurrency"] == [1, 2]


def test_the_annotation_puts_the_failing_candidate_first_marked_and_keeps_the_passing_one(tmp_path):
    from harness.report.render import annotation

    run = make_run(tmp_path, [True] * 10 + [False] * 30)
    rendered = render_run(run, exit_code=0)
    note = annotation([("cpu-smoke", "cpu-ref"), ("cpu-fast", "cpu-ref")], rendered.exit_code, rendered.markdown,
                      basis=rendered.basis)
    bullets = [x for x in note.split("### Accuracy")[0].splitlines() if x.startswith("- ")]
    assert bullets[:2] == ["- ❌ cpu-fast vs cpu-ref: FAILED (gate gsm8k_paired_accuracy)",
                           "- ❌ Gate gsm8k_paired_accuracy cpu-fast: FAIL" + bullets[1].split(": FAIL", 1)[1]]
    assert "- cpu-smoke vs cpu-ref: PASSED" in bullets and not any("❌" in x for x in bullets[2:])
    assert note.splitlines()[0] == ("## DCP qualification FAILED: cpu-smoke vs cpu-ref, cpu-fast vs cpu-ref (exit code "
                                    "1) — judged: 4 reference checks with no record of what judged them; 0 tests "
                                    "skipped")
