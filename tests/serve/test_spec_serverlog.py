"""Draft-KV policy and speculative refusals read from a server log (pure)."""

from harness.config.arms import load_arm
from harness.config.errors import LaunchError
from harness.serve.launch import refused_speculation
from harness.serve.serverlog import parse_draft_kv, spec_refusal

REFUSAL = ("(EngineCore_DP0 pid=1) ValueError: Speculative decoding is not supported with decode context "
           "parallel size > 1")


def test_a_stated_draft_kv_policy_is_read_and_silence_is_none():
    assert parse_draft_kv("INFO Draft model KV cache sharded over 8 DCP ranks (VLLM_DCP_SHARD_DRAFT=1)") == "sharded"
    assert parse_draft_kv("INFO draft KV cache replicated on every target rank") == "replicated"
    assert parse_draft_kv("INFO Draft model KV cache initialized for CPU backend\nGPU KV cache size: 9 tokens") is None


def test_a_refusal_of_speculation_is_named_and_other_failures_pass_through():
    assert spec_refusal(f"INFO starting\n{REFUSAL}\nEngine core initialization failed") == REFUSAL.split(") ", 1)[1]
    assert spec_refusal("RuntimeError: CUDA out of memory") is None
    exc = LaunchError("server exited (1) during start-up")
    said = str(refused_speculation(load_arm("cpu-spec"), REFUSAL, exc))
    assert said.startswith("arm 'cpu-spec': the installed vLLM refused speculative decoding (speculative.method "
                           "'ngram', dcp 1): ValueError: Speculative decoding is not supported")
    assert refused_speculation(load_arm("cpu-ref"), REFUSAL, exc) is exc  # no drafter: not a refusal of one
