"""DCP preflight: pure checks on an arm before any GPU is held.

Each rule takes plain values and returns a Verdict; `preflight(arm)` runs them all.
The rules come from the DCP seeds (see DESIGN.md):
  * tp % dcp == 0
  * PCP must be 1 when DCP > 1
  * gathered heads = (heads / tp) * dcp must be a multiple of 8 (the kernel tile)
  * largest local interleaved KV shard = ceil(max_len / (dcp * interleave)) * interleave <= 2**20
  * MLA transport geometry: query head = kv_lora_rank + qk_rope_head_dim, output head = kv_lora_rank
  * a DSpark draft on a DCP target only with a B12X_MLA draft backend; its KV is
    replicated on every target rank unless VLLM_DCP_SHARD_DRAFT=1
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm, Geometry, Parallelism
from harness.plan.redact import SECRET_FLAGS

HEAD_TILE = 8
MAX_LOCAL_KV_SHARD_TOKENS = 1_048_576
DCP_DRAFT_BACKEND = "B12X_MLA"


@dataclass(frozen=True)
class Verdict:
    rule: str
    ok: bool
    detail: str


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def gathered_heads(num_heads: int, tp: int, dcp: int) -> int:
    """Heads each rank holds after DCP's all-gather of queries: local heads x dcp."""
    return (num_heads // tp) * dcp


def largest_local_kv_shard(max_model_len: int, dcp: int, interleave: int) -> int:
    return ceil_div(max_model_len, dcp * interleave) * interleave


def mla_transport(geometry: Geometry) -> tuple[int, int]:
    """(query head, reduced output head) elements that DCP moves between ranks for MLA."""
    assert geometry.kv_lora_rank is not None
    return geometry.kv_lora_rank + (geometry.qk_rope_head_dim or 0), geometry.kv_lora_rank


def check_tp_divisible(p: Parallelism) -> Verdict:
    ok = p.tp % p.dcp == 0
    detail = f"tp {p.tp} % dcp {p.dcp} = {p.tp % p.dcp}"
    return Verdict("tp_divisible_by_dcp", ok, detail + ("" if ok else ": DCP must divide TP"))


def check_pcp_with_dcp(p: Parallelism) -> Verdict:
    ok = p.dcp == 1 or p.pcp == 1
    detail = f"pcp {p.pcp} with dcp {p.dcp}"
    return Verdict("pcp_off_with_dcp", ok, detail + ("" if ok else ": prefill CP must be 1 when DCP > 1"))


def check_gathered_heads(p: Parallelism, g: Geometry) -> Verdict:
    rule = "gathered_heads_multiple_of_8"
    if p.dcp == 1:
        return Verdict(rule, True, "dcp 1: no head gather")
    if g.num_attention_heads is None:
        return Verdict(rule, False, "num_attention_heads unknown: set model.geometry or model.config_json")
    if g.num_attention_heads % p.tp:
        return Verdict(rule, False, f"{g.num_attention_heads} attention heads do not split over tp {p.tp}")
    local = g.num_attention_heads // p.tp
    gathered = gathered_heads(g.num_attention_heads, p.tp, p.dcp)
    ok = gathered % HEAD_TILE == 0
    detail = f"{local} local heads x dcp {p.dcp} = {gathered} gathered heads"
    return Verdict(rule, ok, detail + ("" if ok else f": not a multiple of the {HEAD_TILE}-head kernel tile"))


def check_kv_shard(p: Parallelism, max_model_len: int) -> Verdict:
    shard = largest_local_kv_shard(max_model_len, p.dcp, p.cp_kv_cache_interleave_size)
    ok = shard <= MAX_LOCAL_KV_SHARD_TOKENS
    detail = (f"ceil({max_model_len} / ({p.dcp} x {p.cp_kv_cache_interleave_size})) x "
              f"{p.cp_kv_cache_interleave_size} = {shard} tokens (bound {MAX_LOCAL_KV_SHARD_TOKENS})")
    return Verdict("local_kv_shard_bound", ok, detail + ("" if ok else ": lower max_model_len or raise dcp"))


def check_mla_transport(p: Parallelism, g: Geometry) -> Verdict:
    rule = "mla_transport_geometry"
    if p.dcp == 1 or not g.is_mla:
        return Verdict(rule, True, "not an MLA model under DCP: no MLA transport")
    if g.qk_rope_head_dim is None:
        return Verdict(rule, False, "MLA model without qk_rope_head_dim: set model.geometry.qk_rope_head_dim")
    query, output = mla_transport(g)
    heads = gathered_heads(g.num_attention_heads or 0, p.tp, p.dcp)
    return Verdict(rule, True, f"{heads} transport heads, query head {query} "
                   f"(kv_lora_rank {g.kv_lora_rank} + rope {g.qk_rope_head_dim}), output head {output}")


def check_dspark_draft(arm: Arm) -> list[Verdict]:
    spec = arm.speculative
    if spec is None or spec.method.lower() != "dspark":
        return []
    if arm.parallelism.dcp == 1:
        return [Verdict("dspark_draft_backend", True, "DCP1 target: any draft backend")]
    backend = spec.attention_backend
    ok = backend == DCP_DRAFT_BACKEND
    detail = f"draft backend {backend or 'unset'} on a DCP{arm.parallelism.dcp} target"
    backend_verdict = Verdict("dspark_draft_backend", ok,
                              detail + ("" if ok else f": only {DCP_DRAFT_BACKEND} drafts may sit on a DCP target"))
    sharded = arm.dcp_env.shard_draft == "force"
    kv = Verdict("dspark_draft_kv", True, "draft KV sharded over DCP ranks (VLLM_DCP_SHARD_DRAFT=1)" if sharded
                 else f"draft KV replicated on all {arm.parallelism.tp} target ranks (VLLM_DCP_SHARD_DRAFT not 1)")
    return [backend_verdict, kv]


def check_nodes(arm: Arm) -> Verdict:
    p = arm.parallelism
    if p.world_size % p.nnodes:
        return Verdict("nodes_split_evenly", False, f"world size {p.world_size} does not split over {p.nnodes} nodes")
    per_node = p.world_size // p.nnodes
    if arm.gpus is not None and len(arm.gpus) != per_node:
        return Verdict("nodes_split_evenly", False,
                       f"gpus lists {len(arm.gpus)} devices but each node runs {per_node} ranks")
    if arm.launcher.nodes and len(arm.launcher.nodes) != p.nnodes:
        return Verdict("nodes_split_evenly", False,
                       f"launcher.nodes names {len(arm.launcher.nodes)} hosts for nnodes {p.nnodes}")
    return Verdict("nodes_split_evenly", True, f"{p.nnodes} node(s) x {per_node} ranks")


def check_no_secret_in_argv(arm: Arm) -> Verdict:
    leaked = [a.split("=")[0] for a in arm.server.args if a.split("=")[0] in SECRET_FLAGS]
    ok = not leaked
    detail = "no secrets in argv" if ok else (
        f"{', '.join(leaked)} in server.args is visible to every user in `ps`: "
        "pass VLLM_API_KEY / HF_TOKEN through server.env instead")
    return Verdict("no_secret_in_argv", ok, detail)


def check_workload_fits(workload: str, needed_len: int, arm: str, max_model_len: int) -> Verdict:
    ok = needed_len <= max_model_len
    detail = f"workload {workload} needs {needed_len} tokens (prompt + output); arm {arm} max_model_len {max_model_len}"
    return Verdict("workload_fits_max_model_len", ok, detail + ("" if ok else ": shorten the workload or raise it"))


def preflight(arm: Arm) -> list[Verdict]:
    p, g = arm.parallelism, arm.model.geometry
    return [
        check_tp_divisible(p),
        check_pcp_with_dcp(p),
        check_gathered_heads(p, g),
        check_kv_shard(p, arm.model.max_model_len),
        check_mla_transport(p, g),
        *check_dspark_draft(arm),
        check_nodes(arm),
        check_no_secret_in_argv(arm),
    ]


def violations(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.ok]
