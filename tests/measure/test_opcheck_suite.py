"""suites/test_dcp_ops.py without a GPU: it runs the real runner in the server environment, which skips; the suite
records the reason and skips (never a silent pass). An arm without DCP skips before running anything."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.config.paths import REPO_ROOT, server_python
from harness.config.thresholds import load_gates
from harness.records.schema import DcpOpsRecord


def suite():
    return runpy.run_path(str(REPO_ROOT / "suites" / "test_dcp_ops.py"))["test_dcp_ops"]


def session(tmp_path: Path, dcp: int) -> tuple[SimpleNamespace, SimpleNamespace]:
    """(harness_session, under_test) as the suite gets them."""
    arm = SimpleNamespace(name="gpu-dcp2", parallelism=SimpleNamespace(dcp=dcp), launcher=SimpleNamespace(python=None))
    return (SimpleNamespace(arm=lambda name: arm, run_dir=tmp_path),
            SimpleNamespace(candidate=arm.name, thresholds=lambda: load_gates(arm.name)))


def recorder(into: list):
    def record(kind, *, arm, **fields):
        into.append(kind(run_id="r", arm=arm, suite="dcp_ops", **fields))
        return into[-1]
    return record


def test_no_gpu_records_the_runners_reason_and_skips(tmp_path, monkeypatch):
    if not Path(server_python()).exists():
        pytest.skip(f"no server environment at {server_python()}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    got: list[DcpOpsRecord] = []
    with pytest.raises(pytest.skip.Exception, match="no CUDA device visible"):
        suite()(*session(tmp_path, 2), recorder(got))
    (rec,) = got
    assert rec.status == "skipped" and rec.passed and "no CUDA device visible" in rec.detail and rec.world == 2
    written = json.loads((tmp_path / "gpu-dcp2" / "dcp_ops.json").read_text())
    assert written["status"] == "skipped" and written["limits"] == {"k_out": 4.0, "k_lse": 16.0}
    assert (tmp_path / "gpu-dcp2" / "dcp_ops.log").read_text().startswith("$ ")


def test_arm_without_dcp_skips_without_running_the_runner(tmp_path):
    got: list[DcpOpsRecord] = []
    with pytest.raises(pytest.skip.Exception, match=r"parallelism.dcp = 1: no DCP ops to check"):
        suite()(*session(tmp_path, 1), recorder(got))
    assert got[0].status == "skipped" and not (tmp_path / "gpu-dcp2").exists()


def test_a_runner_that_cannot_start_fails_as_no_data(tmp_path):
    from harness.config.thresholds import DcpOpsGates
    from harness.judge.dcp_ops import judge_dcp_ops
    from harness.measure.opcheck import run_op_suite

    ran = run_op_suite(str(tmp_path / "no-python"), 2, "cuda", tmp_path / "a" / "dcp_ops.json", DcpOpsGates())
    rec = DcpOpsRecord(run_id="r", arm="a", suite="dcp_ops", **judge_dcp_ops(ran.result, 2, "cuda", ran.problem))
    assert rec.status == "no_data" and rec.detail.startswith("no data: cannot start the server interpreter")
