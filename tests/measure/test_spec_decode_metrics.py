"""The spec_decode measurement's pure parts: prompts, /metrics counters, sample round trip and timings."""

import pytest

from harness.config.workloads import SpecDecodeWorkload
from harness.measure.spec_decode_metrics import (
    SpecSample,
    build_spec_prompts,
    prompts_sha,
    spec_counters,
    timing_fields,
)

METRICS = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 40.0
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 120.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 66.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 21.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 15.0
"""
ROWS = [{"question": f"q{i}?", "answer": f"a{i} #### {i}"} for i in range(40)]


def test_counters_are_read_and_differenced():
    after = spec_counters(METRICS)
    assert (after.drafts, after.draft_tokens, after.accepted) == (40, 120, 66)
    assert after.accepted_per_pos == {0: 30, 1: 21, 2: 15}
    before = spec_counters(METRICS.replace("40.0", "10.0").replace("30.0", "5.0"))
    d = after.minus(before)
    assert d.drafts == 30 and d.accepted_per_pos[0] == 25 and d.accepted_per_pos[2] == 0


def test_a_server_without_a_drafter_has_no_counters():
    assert spec_counters('vllm:num_requests_running{engine="0"} 0.0\n') is None


def test_prompts_are_fixed_and_the_long_ones_carry_many_examples():
    w = SpecDecodeWorkload(name="w", gsm8k_prompts=3, gsm8k_shots=1, long_context_prompts=2, long_context_shots=5)
    prompts = build_spec_prompts(w, ROWS, ROWS)
    assert [p.id for p in prompts] == ["gsm8k-0", "gsm8k-1", "gsm8k-2", "long-0", "long-1"]
    assert prompts[0].text == "Question: q0?\nAnswer: a0 #### 0\n\nQuestion: q0?\nAnswer:"
    assert prompts[3].text.count("Question:") == 6 and prompts[3].text.endswith("Question: q3?\nAnswer:")
    assert prompts_sha(prompts) == prompts_sha(build_spec_prompts(w, ROWS, ROWS))


def test_a_sample_round_trips_and_its_timings_follow_vllm_bench():
    s = SpecSample("gsm8k-0", "gsm8k", [1, 2, 3], [-0.1, -0.2, -0.3], [{1: -0.1, 9: -2.0}] * 3, "a b c",
                   ttft_s=0.1, latency_s=0.5, output_tokens=3)
    back = SpecSample.from_json(s.to_json())
    assert back == s and back.top[0] == {1: -0.1, 9: -2.0}
    assert s.tpot_s == pytest.approx(0.2)
    failed = SpecSample("x", "gsm8k", error="boom")
    t = timing_fields([s, failed])
    assert t["failed"] == 1 and t["errors"] == ["x: boom"] and t["tpot"].n == 1
    assert t["tokens_per_s"] == pytest.approx(6.0)
