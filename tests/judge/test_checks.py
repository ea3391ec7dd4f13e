from harness.judge import checks


def test_failed_requests_and_cold_start_checks():
    assert checks.failed_requests("a", 1, 0, 0) is None
    assert checks.failed_requests("a", 1, 2, 0) == "a c1: 2 failed request(s), at most 0 allowed"
    assert checks.cold_start("a", 0.019, 0.010, 2.0) is None
    assert "cold-start TPOT 25.000 ms > 2 x steady-state p50 10.000 ms" in checks.cold_start("a", 0.025, 0.010, 2.0)


def test_kv_capacity_log_and_metrics_must_agree():
    assert checks.kv_capacity_agrees("a", 2_018_304, 2_018_304) is None
    assert checks.kv_capacity_agrees("a", 2_018_304, None) is None  # not exported by older vLLMs
    msg = checks.kv_capacity_agrees("a", 31_871_376, 2_018_304)  # e.g. a draft model's line parsed by mistake
    assert msg == "arm 'a': log says 31871376 KV tokens, /metrics kv_cache_size_tokens says 2018304"


def test_accuracy_floors():
    assert checks.accuracy_floors("dcp8", 1279, 1319, 0.95, 0.94) == []
    out = checks.accuracy_floors("dcp8", 1200, 1319, 0.95, 0.94)
    assert "accuracy 90.98% (1200/1319) below the floor 95.00%" in out[0] and "Wilson lower bound" in out[1]


def test_attention_backend_fallback_is_a_failed_check():
    assert checks.attention_backend_fallback("a", "FLASHMLA", ["FLASHMLA"]) is None
    assert "silent fallback" in checks.attention_backend_fallback("a", "FLASHMLA", ["TRITON_MLA"])
    assert "names no attention backend" in checks.attention_backend_fallback("a", "FLASHMLA", [])
    assert checks.attention_backend_fallback("a", None, []) is None
