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
