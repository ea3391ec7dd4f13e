"""Reference checks, pure parts: comparison and verdicts, the check prompt set, the reference store."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from harness.config.arms import load_arm
from harness.config.errors import WorkloadError
from harness.config.workloads import PrefixReuseSpec, ReferenceChecksWorkload
from harness.judge.checks import prefix_hit_proven
from harness.measure.generation import Generation, Sampling, parse_choice, token_id
from harness.measure.prompts import TokenSpace
from harness.refcheck.judging.compare import compare_outputs, is_tie_flip, judge_comparisons, summary_fields
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields
from harness.refcheck.prompts.check_prompts import build_check_prompts, expected_hit_tokens, interleave
from harness.refcheck.store import reference_store as store


def gen(ids, lps=None):
    lps = lps if lps is not None else [-0.1] * len(ids)
    return Generation(list(ids), list(lps), [{t: lp, t + 1000: lp - 2.0} for t, lp in zip(ids, lps, strict=True)])


# --- comparison ---------------------------------------------------------------------------------------------------

def test_identical_outputs_match_exactly_with_zero_drift():
    c = compare_outputs("p0", 10, gen([1, 2, 3]), gen([1, 2, 3]))
    assert c.exact and c.first_divergence is None and c.max_drift == 0.0 and c.finite
    assert judge_comparisons("x", [c], 1e-2).passed


def test_divergence_names_request_position_and_reference_gap():
    c = compare_outputs("r3b5-2", 10, gen([1, 2, 9, 4]), gen([1, 2, 3, 4]), group="round 3 (batch 5)")
    assert not c.exact and c.first_divergence == 2 and c.reference_gap_at_divergence == pytest.approx(2.0)
    v = judge_comparisons("graph_replay", [c], 1e-2)
    assert not v.passed
    assert "request r3b5-2 [round 3 (batch 5)]: generated token 2 differs" in v.failures[0]


def test_drift_counts_only_up_to_the_first_divergence():
    cand = gen([1, 2, 9], [-0.1, -0.1, -5.0])
    ref = gen([1, 2, 3], [-0.1, -0.105, -0.1])
    c = compare_outputs("p", 1, cand, ref)
    assert c.max_drift == pytest.approx(0.005)


def test_drift_over_the_limit_fails_even_when_tokens_match():
    c = compare_outputs("p", 1, gen([1, 2], [-0.1, -0.1]), gen([1, 2], [-0.1, -0.15]))
    v = judge_comparisons("prefix_reuse", [c], 1e-2)
    assert not v.passed and "max |delta logprob| 0.05 > 0.01" in v.failures[0]
    assert judge_comparisons("prefix_reuse", [c], 0.1).passed


def test_non_finite_logprob_fails():
    c = compare_outputs("p", 1, gen([1, 2], [-0.1, float("-inf")]), gen([1, 2]))
    assert not c.finite and math.isinf(c.max_drift)
    assert "non-finite logprob" in judge_comparisons("x", [c], 1e-2).failures[0]


def test_shorter_output_is_a_divergence_at_its_end():
    c = compare_outputs("p", 1, gen([1, 2]), gen([1, 2, 3]))
    assert not c.exact and c.first_divergence == 2


def test_no_comparison_is_a_failure_not_a_pass():
    v = judge_comparisons("graph_replay", [], 1e-2)
    assert not v.passed and "no request was compared" in v.detail


def test_summary_fields():
    cs = [compare_outputs("a", 1, gen([1, 2]), gen([1, 2])), compare_outputs("b", 1, gen([1, 5, 6]), gen([1, 2, 6]))]
    s = summary_fields(cs)
    # checked_generated_tokens: a's 2 equal tokens, b's first two (compared up to and including its divergence)
    assert s == {"requests": 2, "exact_matches": 1, "first_divergence_min": 1, "max_drift": 0.0, "nonfinite": 0,
                 "tie_flips": 0, "tie_gap": 0.0, "checked_generated_tokens": 2}


def test_aborted_check_keeps_comparisons_and_fails(tmp_path):
    run = BatchComparisons([compare_outputs("a", 1, gen([1]), gen([1]))],
                           aborted="round 2 (batch 3): server exited\nlog tail")
    f = record_fields("graph_replay", "cpu-ref", "k", run, 1e-2, tmp_path / "c.jsonl")
    assert f.status == "aborted" and not f.passed and f.requests == 1
    assert f.diverged[0].startswith("aborted after 1 comparison(s): round 2 (batch 3): server exited")


# --- the completions API edge ---------------------------------------------------------------------------------------

def test_parse_choice_reads_token_ids_and_top_logprobs():
    choice = {"text": "", "logprobs": {"tokens": ["token_id:17", "token_id:4"], "token_logprobs": [-0.5, None],
                                       "top_logprobs": [{"token_id:17": -0.5, "token_id:3": -1.5}, None]}}
    g = parse_choice(choice)
    assert g.token_ids == [17, 4] and g.top[0] == {17: -0.5, 3: -1.5} and g.top[1] == {}
    assert math.isnan(g.logprobs[1])  # null logprob stays non-finite: the check sees it


def test_token_strings_instead_of_ids_are_refused():
    with pytest.raises(WorkloadError, match="return_tokens_as_token_ids"):
        token_id("hello")


def test_sampling_body_is_greedy_fixed_length_with_ids():
    body = Sampling(24, 5).body("m", [1, 2])
    assert body["temperature"] == 0.0 and body["ignore_eos"] and body["return_tokens_as_token_ids"]
    assert body["logprobs"] == 5 and body["max_tokens"] == 24 and "cache_salt" not in body
    assert Sampling(24, 5).body("m", [1], cache_salt="reference-warm")["cache_salt"] == "reference-warm"


# --- the prompt set -------------------------------------------------------------------------------------------------

WORKLOAD = ReferenceChecksWorkload(
    name="t", output_tokens=8,
    prefix_reuse=PrefixReuseSpec(prefix_tokens=600, shared_tokens=[128, 256], probes_per_share=2,
                                 uncached_probes=2, probe_suffix_tokens=(10, 40)),
)
SPACE = TokenSpace(500, frozenset({0, 1, 2}))


def test_prompts_are_deterministic_and_fingerprinted():
    a, b = build_check_prompts(WORKLOAD, SPACE), build_check_prompts(WORKLOAD, SPACE)
    assert a == b and a.fingerprint() == b.fingerprint()
    other = build_check_prompts(WORKLOAD.model_copy(update={"seed": 1}), SPACE)
    assert other.fingerprint() != a.fingerprint()


def test_probes_share_exactly_their_block_aligned_part():
    p = build_check_prompts(WORKLOAD, SPACE)
    prefix = p.warm.tokens[:600]
    for probe in p.probes:
        n = probe.shared_tokens
        assert probe.tokens[:n] == prefix[:n] and probe.tokens[n] != prefix[n]
    assert [q.group for q in p.probes][:4] == ["cached 128", "uncached", "cached 128", "uncached"]
    assert expected_hit_tokens(p.probes, 128) == 2 * 128 + 2 * 256
    assert expected_hit_tokens(p.probes, 256) == 2 * 0 + 2 * 256  # 128 tokens are not a whole 256-block


def test_graph_replay_rounds_walk_batch_sizes_with_fresh_prompts():
    p = build_check_prompts(WORKLOAD, SPACE)
    assert [len(r) for r in p.rounds] == [1, 2, 3, 5, 8, 13]
    ids = [q.id for q in p.all()]
    assert len(ids) == len(set(ids))
    assert len({len(q.tokens) for r in p.rounds for q in r}) > 5  # lengths change between requests
    assert all(not set(q.tokens) & SPACE.excluded for q in p.all())


def test_interleave():
    assert interleave([1, 2, 3], ["a"]) == [1, "a", 2, 3]


def test_prefix_hit_proof():
    assert prefix_hit_proven("a", 768.0, 768, True) is None
    assert "prefix caching off" in prefix_hit_proven("a", 0.0, 768, False)
    assert "0 tokens < 768 expected" in prefix_hit_proven("a", 0.0, 768, True)
    assert "no vllm:prefix_cache_hits" in prefix_hit_proven("a", None, 768, True)


# --- the store ------------------------------------------------------------------------------------------------------

@pytest.fixture
def model_copy(tmp_path):
    """A model directory the store hashes: config, weights and tokenizer files (their bytes, not a real model), so
    these tests run on a fresh clone without `make model`."""
    dst = tmp_path / "model"
    dst.mkdir()
    (dst / "config.json").write_text(json.dumps({"num_attention_heads": 4, "num_key_value_heads": 4,
                                                 "max_position_embeddings": 8192, "vocab_size": 512}))
    (dst / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (dst / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 0, "content": "<s>"}]}))
    (dst / "tokenizer_config.json").write_text(json.dumps({"pad_token": "<pad>"}))
    return dst


def arm_at(path: Path, name: str = "cpu-ref", **server):
    arm = load_arm(name, [f"model.path={path}"])
    return arm.model_copy(update={"server": arm.server.model_copy(update=server)}) if server else arm


def stored(arm, prompts, tmp_path, version="0.32.0"):
    key = store.make_key(arm, store.model_identity(arm), prompts, Sampling(8, 5), version)
    outputs = {p.id: gen([5, 6, 7]) for p in prompts.all()}
    return key, store.save(key, arm.name, prompts, outputs, tmp_path / "refs")


def test_store_round_trip_and_key_sensitivity(model_copy, tmp_path):
    arm = arm_at(model_copy)
    prompts = build_check_prompts(WORKLOAD, SPACE)
    key, path = stored(arm, prompts, tmp_path)
    got = store.load(key, arm.name, prompts, tmp_path / "refs")
    assert got is not None and got.outputs["warm"] == gen([5, 6, 7]) and got.path == path
    meta = json.loads(path.read_text())["meta"]
    assert set(meta) == {"model", "prompt_set_sha", "sampling", "vllm_version", "arm_config_sha"}
    # anything that could change the outputs gives another key: a miss, not a reuse
    other = [store.make_key(arm, store.model_identity(arm), prompts, Sampling(8, 5), "0.33.0"),
             store.make_key(arm, store.model_identity(arm), prompts, Sampling(9, 5), "0.32.0"),
             store.make_key(arm_at(model_copy, enforce_eager=False), store.model_identity(arm), prompts,
                            Sampling(8, 5), "0.32.0"),
             store.make_key(arm, store.model_identity(arm), build_check_prompts(
                 WORKLOAD.model_copy(update={"seed": 3}), SPACE), Sampling(8, 5), "0.32.0")]
    assert len({k.digest for k in other} | {key.digest}) == 5
    assert all(store.load(k, arm.name, prompts, tmp_path / "refs") is None for k in other[:3])


def test_corrupt_reference_file_is_an_error_naming_the_fix(model_copy, tmp_path):
    arm = arm_at(model_copy)
    prompts = build_check_prompts(WORKLOAD, SPACE)
    key, path = stored(arm, prompts, tmp_path)
    path.write_text(path.read_text()[:100])
    with pytest.raises(store.ReferenceStoreError, match="is corrupt.*--refresh-reference"):
        store.load(key, arm.name, prompts, tmp_path / "refs")


def test_reference_file_whose_metadata_or_prompts_differ_is_refused(model_copy, tmp_path):
    arm = arm_at(model_copy)
    prompts = build_check_prompts(WORKLOAD, SPACE)
    key, path = stored(arm, prompts, tmp_path)
    doc = json.loads(path.read_text())
    doc["meta"]["vllm_version"] = "0.1.0"
    path.write_text(json.dumps(doc))
    with pytest.raises(store.ReferenceStoreError, match="vllm_version: stored '0.1.0', expected '0.32.0'"):
        store.load(key, arm.name, prompts, tmp_path / "refs")
    key, path = stored(arm, prompts, tmp_path)
    doc = json.loads(path.read_text())
    doc["outputs"]["warm"]["prompt_sha"] = "0" * 16
    del doc["outputs"]["uncached-0"]
    path.write_text(json.dumps(doc))
    with pytest.raises(store.ReferenceStoreError, match="prompt warm has other tokens.*prompt uncached-0 missing"):
        store.load(key, arm.name, prompts, tmp_path / "refs")


def test_model_identity_sees_one_changed_weight_byte_and_the_tokenizer(model_copy, tmp_path):
    arm = arm_at(model_copy)
    same = store.model_identity(arm)
    assert store.model_difference(arm, same, arm, store.model_identity(arm)) is None
    other_dir = tmp_path / "perturbed"
    shutil.copytree(model_copy, other_dir)
    weights = other_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0x01  # one bit of one weight
    weights.write_bytes(bytes(data))
    tok = other_dir / "tokenizer_config.json"
    tok.write_text(tok.read_text().replace("<pad>", "<pad2>"))
    other = arm_at(other_dir, "cpu-smoke")
    msg = store.model_difference(other, store.model_identity(other), arm, same)
    assert msg and "weights_sha" in msg and "tokenizer_sha" in msg and "config_sha" not in msg
    assert "'cpu-smoke'" in msg and "cannot be compared" in msg



def test_flip_at_a_tie_in_the_reference_is_not_a_fault_but_a_wide_gap_flip_is():
    tied = Generation([1, 2, 3], [-0.7, -0.7, -0.7], [{1: -0.7, 50: -0.8}, {2: -0.7, 9: -0.7}, {3: -0.7, 7: -3.0}])
    at_tie = compare_outputs("t", 1, gen([1, 9, 3]), tied)  # reference gap 0 at token 1
    at_wide = compare_outputs("w", 1, gen([1, 2, 7]), tied)  # reference gap 2.3 at token 2
    assert at_tie.reference_gap_at_divergence == 0.0 and at_wide.reference_gap_at_divergence == pytest.approx(2.3)
    v = judge_comparisons("graph_replay", [at_tie], drift_limit=1.0, tie_gap=0.125)
    assert v.passed and "1 tie flip(s)" in v.detail
    assert judge_comparisons("graph_replay", [at_tie], drift_limit=1.0, tie_gap=0.0).passed  # an exact tie: argmax arbitrary
    assert not judge_comparisons("graph_replay", [at_wide], drift_limit=1.0, tie_gap=0.125).passed
    assert summary_fields([at_tie, at_wide], 0.125)["tie_flips"] == 1
    # float32 logprobs: one bf16 step (0.125) arrives as 0.12500000xx and is still within a 0.125 tie_gap
    step = Generation([1, 2], [-0.4, -0.1], [{1: -0.4, 34: -0.52500001}, {2: -0.1}])
    assert is_tie_flip(compare_outputs("s", 1, gen([34, 2]), step), 0.125)
    assert not is_tie_flip(compare_outputs("s", 1, gen([34, 2]), step), 0.1)
