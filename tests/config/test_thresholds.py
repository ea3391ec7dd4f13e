import shutil

import pytest
import yaml

from harness.config import thresholds
from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT


def test_defaults_and_arm_override():
    assert thresholds.load_gates("dcp8").long_prefix.tpot_p50_tolerance == 0.05
    assert thresholds.load_gates("cpu-smoke").long_prefix.tpot_p50_tolerance == 0.5


def test_bad_gates_file(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  long_prefix:\n    tpot_tolerance: 0.1\n")
    with pytest.raises(ConfigError, match="long_prefix.tpot_tolerance"):
        thresholds.load_gates("x", path)
    path.write_text("default: {}\n")
    with pytest.raises(ConfigError, match="unknown top-level key"):
        thresholds.load_gates("x", path)


def test_cpu_pair_records_timing_gates_without_enforcing():
    assert thresholds.load_gates("cpu-smoke").long_prefix.enforce_timing is False
    assert thresholds.load_gates("dcp8").long_prefix.enforce_timing is True


def test_op_limits_have_one_source_read_alike_by_the_harness_and_the_server_side_runner():
    from harness.opcheck.tolerance import load_tolerances

    assert thresholds.load_gates("gpu-dcp2").dcp_ops.model_dump() == load_tolerances(arm="gpu-dcp2").model_dump() == {
        "k_out": 4.0, "k_lse": 16.0}


def test_an_arm_is_judged_with_the_limits_of_the_arms_it_extends(tmp_path):
    # The H200 length-fault run: its fault arms (`extends: gpu-mla-120k`) got the 0.01 default drift limit, not the
    # tiny MLA's 0.25, and failed their clean cells on bf16 noise. Now a variant inherits its base's section.
    arms = tmp_path / "arms"
    shutil.copytree(REPO_ROOT / "configs" / "arms", arms)
    (arms / "gpu-mla-120k-rope-offset-past-l-64000.yaml").write_text("extends: gpu-mla-120k\n")
    (arms / "own-limit.yaml").write_text("extends: gpu-mla-120k\n")
    raw = yaml.safe_load((REPO_ROOT / "configs" / "gates.yaml").read_text())
    raw["arms"]["own-limit"] = {"reference_checks": {"drift_limit": 0.3}}
    gates = tmp_path / "gates.yaml"
    gates.write_text(yaml.safe_dump(raw))
    fault = thresholds.load_gates("gpu-mla-120k-rope-offset-past-l-64000", gates, arms).reference_checks
    assert (fault.drift_limit, fault.require_floor) == (0.25, True)
    assert thresholds.load_gates("own-limit", gates, arms).reference_checks.drift_limit == 0.3  # its own wins
    assert thresholds.load_gates("no-such-arm", gates, arms).reference_checks.drift_limit == 0.01  # defaults
    # shipped: cpu-slurm extends cpu-smoke, so the CPU pair's timing is recorded, not enforced, on SLURM as well
    assert thresholds.load_gates("cpu-slurm").long_prefix.enforce_timing is False


def test_a_check_named_in_drift_limits_gets_its_own_limit_and_every_other_the_arms(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  reference_checks:\n    drift_limit: 0.25\n    drift_limits: {teacher_forcing: 2.0}\n")
    limits = thresholds.load_gates("x", path).reference_checks
    assert [limits.limit_for(c) for c in ("teacher_forcing", "prefix_reuse", "capacity_outputs_c8")] == [2.0, 0.25, 0.25]
    assert thresholds.load_gates("cpu-smoke").reference_checks.limit_for("teacher_forcing") == 0.01


def test_the_shipped_gpu_arms_set_no_limit_by_hand_for_a_calibrated_check_and_require_a_calibration():
    # The hand-raised 2.0s and tie gap 0.5 are gone: a calibration measures them (docs/gates.md, Calibration).
    for arm in ("gpu-mla", "gpu-mla-120k", "gpu-dcp2", "gpu-tp2", "dcp8", "dspark-dcp8", "tp16-dcp16"):
        limits = thresholds.load_gates(arm).reference_checks
        assert limits.require_floor and limits.drift_limits == {} and limits.tie_gap == 0.0, arm
    assert not thresholds.load_gates("cpu-smoke").reference_checks.require_floor  # the CPU pair qualifies the pipeline


def test_drift_limits_refuses_a_misspelt_check_naming_the_ones_it_takes(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  reference_checks:\n    drift_limits: {teacher_forcng: 2.0}\n")
    with pytest.raises(ConfigError, match="teacher_forcng.*long_prefix_outputs"):
        thresholds.load_gates("x", path)
    path.write_text("defaults:\n  reference_checks:\n    drift_limits: {teacher_forcing: 0}\n")
    with pytest.raises(ConfigError, match="drift_limits.teacher_forcing"):
        thresholds.load_gates("x", path)


def test_metric_gates_refuses_a_misspelt_gate_naming_the_ones_it_takes(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  metric_gates: {ttft_p5O: {tolerance: 0.3}}\n")
    with pytest.raises(ConfigError, match="ttft_p5O.*ttft_p50"):
        thresholds.load_gates("x", path)
    path.write_text("defaults:\n  metric_gates: {ttft_p50: {tolerance: -1}}\n")
    with pytest.raises(ConfigError, match="metric_gates.ttft_p50.tolerance"):
        thresholds.load_gates("x", path)
    path.write_text("defaults:\n  metric_gates: {ttft_p50: {tolerance: 0.3, enforce: false}}\n")
    assert thresholds.load_gates("x", path).metric_gates["ttft_p50"].enforce is False
