"""Op-level DCP conformance: the installed vLLM's own DCP building blocks (LSE-weighted combine, local KV lengths,
query gather / output reduce, CUDA-graph replay) on `parallelism.dcp` real ranks, one per GPU, against a float64
reference (harness/opcheck). Runs on the candidate without a vLLM server; where the arm has no DCP or the machine
lacks the GPUs it is skipped, and the record says why."""

import pytest

from harness.config.errors import HarnessError
from harness.config.paths import server_python
from harness.judge.dcp_ops import judge_dcp_ops, not_run
from harness.measure.opcheck import run_op_suite
from harness.records.schema import DcpOpsRecord


def test_dcp_ops(harness_session, under_test, record):
    try:
        arm = harness_session.arm(under_test.candidate)
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    world = arm.parallelism.dcp
    if world <= 1:
        rec = record(DcpOpsRecord, arm=arm.name,
                     **not_run(f"arm {arm.name!r} has parallelism.dcp = {world}: no DCP ops to check", world, "cuda"))
        pytest.skip(rec.detail)
    out = harness_session.run_dir / arm.name / "dcp_ops.json"
    ran = run_op_suite(arm.launcher.python or server_python(), world, "cuda", out, under_test.thresholds().dcp_ops)
    rec = record(DcpOpsRecord, arm=arm.name, **judge_dcp_ops(ran.result, world, "cuda", ran.problem, str(out)))
    if rec.status == "skipped":
        pytest.skip(f"dcp_ops on {arm.name!r}: {rec.detail}")
    assert rec.passed, f"dcp_ops on {arm.name!r} (vLLM {rec.vllm_version}; {out}, log {ran.log_path}):\n{rec.detail}"
