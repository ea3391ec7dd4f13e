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


def test_a_cold_start_without_both_tpots_fails_no_data_where_timing_is_enforced_and_warns_where_not():
    from harness.config.thresholds import LongPrefixGates
    from harness.records.schema import ColdStartRecord

    why = "the first request's output arrived at once (buffered stream): its TPOT is not a timing"
    assert checks.cold_start("a", None, 0.010, 2.0, why) == f"a: cold-start check: no data: {why}"
    assert checks.cold_start("a", 0.010, None, 2.0) == "a: cold-start check: no data: no steady-state TPOT p50"
    assert checks.cold_start("a", None, None, 2.0) == "a: cold-start check: no data: no cold-start TPOT"
    cold = ColdStartRecord(run_id="r", arm="a", suite="long_prefix", workload="w", ttft_s=0.4, tpot_s=None,
                           steady_tpot_p50_s=0.010, factor_limit=2.0, flagged=False, no_data=why)
    failures, notes = checks.long_prefix_failures("a", [], cold, LongPrefixGates(enforce_timing=True))
    assert failures == [f"a: cold-start check: no data: {why}"] and notes == []
    failures, notes = checks.long_prefix_failures("a", [], cold, LongPrefixGates(enforce_timing=False))
    assert failures == [] and notes == [f"not enforced (gates.yaml): a: cold-start check: no data: {why}"]
    # a failed warm-up request is its own failure, with no cold-start line beside it
    failed = cold.model_copy(update={"error": "HTTP 500: boom", "no_data": "the warm-up request failed: HTTP 500"})
    assert checks.long_prefix_failures("a", [], failed, LongPrefixGates()) == (
        ["a: warm-up request failed: HTTP 500: boom"], [])
