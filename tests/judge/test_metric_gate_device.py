"""A catalogue timing gate's tolerance judges only arms of the device it was measured on (issue 45 item 9): ttft's
1.2 comes from CPU-pair noise, so a GPU arm's ttft gate FAILs "not measured for this arm" until gates.yaml sets that
arm's own tolerance -- even where its medians are equal. The device comes from the arm files (load_gates), is
recorded with the run's thresholds, and cannot be set in gates.yaml."""

from __future__ import annotations

import pytest

from harness.config.errors import ConfigError
from harness.config.thresholds import Gates, load_gates
from harness.judge.suite_gates import evaluate_gates
from harness.records.schema import MetricRecord


def rec(arm: str, median: float) -> MetricRecord:
    return MetricRecord(run_id="r", arm=arm, suite="ttft", metric="ttft_s", unit="s", samples=[median] * 3,
                        requests=3)


SAME = [rec("gpu-mla-ref", 0.010), rec("gpu-mla", 0.010)]


def test_a_gpu_arm_is_not_judged_by_a_tolerance_measured_on_cpu():
    gates = load_gates("gpu-mla")
    assert gates.metric_gates["ttft_p50"].arm_device == "gpu" and gates.metric_gates["ttft_p50"].tolerance is None
    (gate,) = evaluate_gates(SAME, "gpu-mla", "gpu-mla-ref", gates, ["ttft"])
    assert not gate.passed and gate.enforced
    assert gate.detail.startswith("FAIL (not measured for this arm: the catalogue's tolerance 1.2 is 3x the largest "
                                  "|log ratio| of 8 clean CPU-pair runs (0.26), measured on CPU; gpu-mla runs on GPU: "
                                  "set gates.yaml arms.gpu-mla.metric_gates.ttft_p50.tolerance"), gate.detail
    # the record a re-rendered report reads back judges the same
    (again,) = evaluate_gates(SAME, "gpu-mla", "gpu-mla-ref", Gates.model_validate(gates.model_dump()), ["ttft"])
    assert again.detail == gate.detail


def test_a_cpu_arm_keeps_the_catalogue_tolerance_and_a_gpu_arm_its_own(tmp_path):
    cpu = load_gates("cpu-smoke")
    assert cpu.metric_gates["ttft_p50"].arm_device == "cpu"
    records = [rec("cpu-ref", 0.010), rec("cpu-smoke", 0.015)]  # 1.5x: within the catalogue's 2.2x
    assert evaluate_gates(records, "cpu-smoke", "cpu-ref", cpu, ["ttft"])[0].passed
    path = tmp_path / "gates.yaml"
    path.write_text("arms:\n  gpu-mla:\n    metric_gates: {ttft_p50: {tolerance: 0.3}}\n")
    own = load_gates("gpu-mla", path)
    assert evaluate_gates(SAME, "gpu-mla", "gpu-mla-ref", own, ["ttft"])[0].passed
    slow = evaluate_gates([SAME[0], rec("gpu-mla", 0.014)], "gpu-mla", "gpu-mla-ref", own, ["ttft"])[0]
    assert not slow.passed and "limit <= 1.30x; the limit: gates.yaml metric_gates" in slow.detail
    # thresholds recorded before the device was (no arm_device): judged as they were
    assert evaluate_gates(SAME, "gpu-mla", "gpu-mla-ref", Gates(), ["ttft"])[0].passed


def test_gates_yaml_cannot_claim_a_device(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("arms:\n  gpu-mla:\n    metric_gates: {ttft_p50: {arm_device: cpu}}\n")
    with pytest.raises(ConfigError, match="arm_device for arm 'gpu-mla': the device comes from the arm's files"):
        load_gates("gpu-mla", path)
