"""The op-suite verdict on real runner output (vLLM 0.25.0 on two H200s: clean, and a planted LSE offset)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.judge.dcp_ops import judge_dcp_ops, not_run
from harness.records.schema import DcpOpsRecord

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def record(fields: dict) -> DcpOpsRecord:
    return DcpOpsRecord(run_id="r", arm="gpu-dcp2", suite="dcp_ops", **fields)


def test_clean_vllm_passes_with_every_case_and_its_skip_named():
    rec = record(judge_dcp_ops(load("dcp_ops_clean.json"), 2, "cuda"))
    assert rec.status == "passed" and rec.passed
    assert len(rec.cases) == 34 and rec.summary == {"PASS": 33, "SKIP": 1}
    assert rec.vllm_version == "0.25.0" and rec.limits == {"k_out": 4.0, "k_lse": 16.0}
    assert "33 of 34 case(s) PASS, 1 SKIP" in rec.detail and "cp_lse_ag_out_rs/masked_args/float32" in rec.detail


def test_planted_lse_offset_fails_naming_the_case_and_its_error():
    rec = record(judge_dcp_ops(load("dcp_ops_lse_offset_1e-2.json"), 2, "cuda"))
    assert rec.status == "failed" and not rec.passed
    assert rec.detail.startswith("15 of 34 DCP op case(s) failed on vLLM 0.25.0:")
    assert "FAIL cp_lse_ag_out_rs/h16d512/bfloat16 (max abs err 0.01 > limit 2.01e-05)" in rec.detail


def test_one_error_case_fails_the_run():
    result = load("dcp_ops_clean.json")
    result["cases"][3].update(verdict="ERROR", detail="RuntimeError: NCCL timeout\ntraceback ...")
    rec = record(judge_dcp_ops(result, 2, "cuda"))
    assert rec.status == "failed" and f"ERROR {result['cases'][3]['id']}: RuntimeError: NCCL timeout" in rec.detail


def test_crashed_or_truncated_runs_fail_as_no_data():
    rec = record(judge_dcp_ops(None, 2, "cuda", "the runner wrote no dcp_ops.json (exit code -9 (the runner crashed))"))
    assert rec.status == "no_data" and not rec.passed
    assert rec.detail == "no data: the runner wrote no dcp_ops.json (exit code -9 (the runner crashed))"
    broken = load("dcp_ops_clean.json")
    broken.update(status="broken", reason="rank 1 exited with code -11", cases=broken["cases"][:5])
    rec = record(judge_dcp_ops(broken, 2, "cuda"))
    assert rec.status == "no_data" and rec.detail == "no data: run broken: rank 1 exited with code -11"
    empty = {**load("dcp_ops_clean.json"), "cases": [], "summary": {}}
    assert record(judge_dcp_ops(empty, 2, "cuda")).detail == "no data: the run has no cases"
    truncated = {k: v for k, v in load("dcp_ops_clean.json").items() if k not in ("status", "cases")}
    assert record(judge_dcp_ops(truncated, 2, "cuda")).detail.startswith("no data: run without a status")
    assert record(judge_dcp_ops({"cases": []}, 2, "cuda")).detail == "no data: result schema None, expected 'dcp-ops/1'"


def test_skips_keep_their_reason():
    skipped = {"schema": "dcp-ops/1", "status": "skipped", "reason": "--world 2 needs 2 GPUs, 1 visible", "cases": []}
    rec = record(judge_dcp_ops(skipped, 2, "cuda"))
    assert rec.status == "skipped" and rec.detail == "--world 2 needs 2 GPUs, 1 visible"
    all_skip = load("dcp_ops_clean.json")
    for c in all_skip["cases"]:
        c.update(verdict="SKIP", detail="no Triton on this device")
    rec = record(judge_dcp_ops(all_skip, 2, "cuda"))
    assert rec.status == "skipped" and rec.detail.endswith(": no Triton on this device")
    assert record(not_run("arm 'x' has parallelism.dcp = 1", 1, "cuda")).status == "skipped"
