import pytest

from harness.config import gates
from harness.config.errors import ConfigError


def test_defaults_and_arm_override():
    assert gates.load_gates("dcp8").long_prefix.tpot_p50_tolerance == 0.05
    assert gates.load_gates("cpu-smoke").long_prefix.tpot_p50_tolerance == 0.5


def test_bad_gates_file(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  long_prefix:\n    tpot_tolerance: 0.1\n")
    with pytest.raises(ConfigError, match="long_prefix.tpot_tolerance"):
        gates.load_gates("x", path)
    path.write_text("default: {}\n")
    with pytest.raises(ConfigError, match="unknown top-level key"):
        gates.load_gates("x", path)


def test_tpot_regression_gate():
    assert gates.tpot_regression("dcp8", "tp8", 1, 0.0105, 0.0138, 0.05) is None  # the seed: DCP8 faster
    msg = gates.tpot_regression("dcp8", "tp8", 2, 0.0150, 0.0138, 0.05)
    assert msg == "c2: dcp8 TPOT p50 15.000 ms > tp8 13.800 ms x (1 + 0.05) = 14.490 ms"
    assert "no TPOT p50 for tp8" in gates.tpot_regression("dcp8", "tp8", 1, 0.01, None, 0.05)


def test_failed_requests_and_cold_start_gates():
    assert gates.failed_requests("a", 1, 0, 0) is None
    assert gates.failed_requests("a", 1, 2, 0) == "a c1: 2 failed request(s), at most 0 allowed"
    assert gates.cold_start("a", 0.019, 0.010, 2.0) is None
    assert "cold-start TPOT 25.000 ms > 2 x steady-state p50 10.000 ms" in gates.cold_start("a", 0.025, 0.010, 2.0)


def test_cpu_pair_records_timing_gates_without_enforcing():
    assert gates.load_gates("cpu-smoke").long_prefix.enforce_timing is False
    assert gates.load_gates("dcp8").long_prefix.enforce_timing is True


def test_kv_capacity_log_and_metrics_must_agree():
    assert gates.kv_capacity_agrees("a", 2_018_304, 2_018_304) is None
    assert gates.kv_capacity_agrees("a", 2_018_304, None) is None  # not exported by older vLLMs
    msg = gates.kv_capacity_agrees("a", 31_871_376, 2_018_304)  # e.g. a draft model's line parsed by mistake
    assert msg == "arm 'a': log says 31871376 KV tokens, /metrics kv_cache_size_tokens says 2018304"
