import pytest

from harness.config import thresholds
from harness.config.errors import ConfigError


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
