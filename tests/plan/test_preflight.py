"""Every preflight rule, with the seed's selector cases (Kimi-K3: 96 heads, kv_lora_rank 512, rope 64)."""

import pytest

from harness.config.arms import Arm, Geometry, Parallelism
from harness.plan.preflight import (
    MAX_LOCAL_KV_SHARD_TOKENS,
    check_dspark_draft,
    check_gathered_heads,
    check_kv_shard,
    check_mla_transport,
    check_no_secret_in_argv,
    check_nodes,
    check_pcp_with_dcp,
    check_tp_divisible,
    gathered_heads,
    largest_local_kv_shard,
    mla_transport,
    preflight,
    violations,
)

KIMI_K3 = Geometry(num_attention_heads=96, kv_lora_rank=512, qk_rope_head_dim=64)


def kimi_arm(**fields) -> Arm:
    base = {"name": "t", "model": {"path": "moonshotai/Kimi-K3", "source": "hub", "served_name": "k",
                                   "max_model_len": 262144, "geometry": KIMI_K3.model_dump(exclude_none=True)}}
    return Arm.model_validate({**base, **fields})


@pytest.mark.parametrize("tp, dcp", [(16, 8), (16, 16), (8, 8)])
def test_seed_selector_cases_accepted(tp, dcp):
    arm = kimi_arm(parallelism={"tp": tp, "dcp": dcp})
    assert violations(preflight(arm)) == []


def test_dcp2_head_geometry_rejected_at_tp16():
    verdict = check_gathered_heads(Parallelism(tp=16, dcp=2), KIMI_K3)
    assert not verdict.ok
    assert "6 local heads x dcp 2 = 12 gathered heads" in verdict.detail
    assert gathered_heads(96, 16, 2) == 12


def test_kimi_k3_tp16_dcp16_transport_geometry():
    p = Parallelism(tp=16, dcp=16)
    assert gathered_heads(96, 16, 16) == 96
    assert mla_transport(KIMI_K3) == (576, 512)
    verdict = check_mla_transport(p, KIMI_K3)
    assert verdict.ok and "96 transport heads, query head 576" in verdict.detail and "output head 512" in verdict.detail


def test_mla_transport_needs_rope_dim():
    assert not check_mla_transport(Parallelism(tp=8, dcp=8), Geometry(num_attention_heads=96, kv_lora_rank=512)).ok


def test_pcp_with_dcp_rejected_and_alone_accepted():
    assert not check_pcp_with_dcp(Parallelism(tp=8, dcp=2, pcp=2)).ok
    assert check_pcp_with_dcp(Parallelism(tp=8, dcp=1, pcp=2)).ok


def test_tp_must_divide_by_dcp():
    assert not check_tp_divisible(Parallelism(tp=8, dcp=3)).ok
    assert check_tp_divisible(Parallelism(tp=8, dcp=4)).ok


def test_heads_must_split_over_tp_and_be_known():
    assert "do not split" in check_gathered_heads(Parallelism(tp=7, dcp=7), KIMI_K3).detail
    assert not check_gathered_heads(Parallelism(tp=8, dcp=8), Geometry()).ok
    assert check_gathered_heads(Parallelism(tp=8, dcp=1), Geometry()).ok  # no gather without DCP


def test_local_kv_shard_bound_formula_and_boundary():
    assert largest_local_kv_shard(1_000_001, 8, 16) == 125_008  # ceil(1000001 / 128) = 7813, x 16
    assert check_kv_shard(Parallelism(tp=2, dcp=2), 2 * MAX_LOCAL_KV_SHARD_TOKENS).ok  # exactly at the bound
    over = check_kv_shard(Parallelism(tp=1, dcp=1), MAX_LOCAL_KV_SHARD_TOKENS + 1)
    assert not over.ok and "1048577 tokens" in over.detail
    # interleave rounds the shard up past the bound
    assert not check_kv_shard(Parallelism(tp=1, dcp=1, cp_kv_cache_interleave_size=16), MAX_LOCAL_KV_SHARD_TOKENS + 1).ok


def dspark(draft_backend, dcp=8, shard="auto") -> Arm:
    return kimi_arm(parallelism={"tp": 8, "dcp": dcp}, dcp_env={"shard_draft": shard},
                    speculative={"method": "dspark", "model": "d", "num_speculative_tokens": 8,
                                 "attention_backend": draft_backend})


def test_dspark_draft_on_dcp_target_needs_b12x():
    backend, kv = check_dspark_draft(dspark("FLASHMLA"))
    assert not backend.ok and "only B12X_MLA" in backend.detail
    backend, kv = check_dspark_draft(dspark("B12X_MLA"))
    assert backend.ok and "replicated on all 8 target ranks" in kv.detail
    _, kv = check_dspark_draft(dspark("B12X_MLA", shard="force"))
    assert "sharded" in kv.detail
    assert all(v.ok for v in check_dspark_draft(dspark("FLASHMLA", dcp=1)))
    assert check_dspark_draft(kimi_arm()) == []  # no draft, no rule


def test_nodes_must_split_world_and_match_gpus():
    assert check_nodes(kimi_arm(parallelism={"tp": 16, "dcp": 16, "nnodes": 2}, gpus=list(range(8)))).ok
    assert not check_nodes(kimi_arm(parallelism={"tp": 16, "nnodes": 3})).ok
    assert check_nodes(kimi_arm(parallelism={"tp": 16, "nnodes": 2}, gpus=list(range(16)))).ok  # a slice per node
    assert not check_nodes(kimi_arm(parallelism={"tp": 16, "nnodes": 2}, gpus=list(range(12)))).ok


def test_secret_flags_in_argv_rejected():
    assert not check_no_secret_in_argv(["vllm", "--api-key=abc"]).ok
    assert not check_no_secret_in_argv(["vllm", "--api-key", "abc"]).ok
    assert not check_no_secret_in_argv(["vllm", "HF_TOKEN=abc"]).ok
    assert not check_no_secret_in_argv(["vllm", "--hf-overrides", '{"hf_token": "abc"}']).ok
    assert check_no_secret_in_argv(["vllm", "--max-num-batched-tokens=512", "--tokenizer", "t"]).ok


def long_prefix(basis: str):
    from harness.config.workloads import LongPrefixWorkload

    # 3,600 prompt token ids + 32: fits 4,096 as ids (3,632); as text, +15 % re-tokenization: 4,140 + 32 = 4,172
    return LongPrefixWorkload(name="lp_near_limit", prefix_tokens=3500, suffix_tokens=100, output_tokens=32,
                              concurrency=[1], requests_per_level=2, prompt_basis=basis)


def fits(w, counted: int | None = None):
    from harness.plan.preflight import check_workload_fits

    return check_workload_fits(w.name, w.prompt_tokens, w.output_tokens, "cpu-ref", 4096, w.prompt_basis, counted)


def test_a_text_basis_workload_that_fits_only_as_token_ids_fails_with_the_numbers():
    from harness.plan.preflight import TEXT_BASIS_GROWTH, TEXT_BASIS_MEASURED, text_basis_tokens

    assert TEXT_BASIS_GROWTH >= TEXT_BASIS_MEASURED == 0.138  # docs/evidence/cpu-tpot-same-prompts-2026-11-30.md
    assert text_basis_tokens(3600) == 4140
    v = fits(long_prefix("text"))
    assert not v.ok and v.rule == "workload_fits_max_model_len"
    assert v.detail == (
        "workload lp_near_limit (prompt_basis: text) needs 4172 tokens: prompt 3600 token ids sent as text, "
        "re-tokenized to 4140 (+15 % allowed for re-tokenization, measured +13.8 % in "
        "docs/evidence/cpu-tpot-same-prompts-2026-11-30.md), + output_tokens 32; arm cpu-ref model.max_model_len 4096: "
        "shorten the workload (prefix_tokens, suffix_tokens), set prompt_basis: token_ids, or raise model.max_model_len")


def test_the_same_workload_as_token_ids_passes():
    v = fits(long_prefix("token_ids"))
    assert v.ok and v.detail == "workload lp_near_limit needs 3632 tokens (prompt + output); arm cpu-ref max_model_len 4096"


def test_the_servers_own_count_of_a_text_prompt_replaces_the_margin():
    w = long_prefix("text")
    assert fits(w, counted=4064).ok  # the server counted fewer than the margin allows: it fits
    v = fits(w, counted=4065)
    assert not v.ok and "re-tokenized to 4065 (as the server's tokenizer counts it)" in v.detail
    assert "needs 4097 tokens" in v.detail
