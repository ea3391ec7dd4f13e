"""Cache hit vs miss (harness/refcheck/judging/hit_miss.py, issue 57 item 6): a cached probe's output against its own cold
send passes within the drift the reference build shows between the same two (and a flip where the reference flipped
too, or at a near-tie), and fails stale KV: a flip at a wide gap or a drift past the allowance; a probe without a
reference measurement cannot pass. The pairs are built as the suite builds them (hit_miss_send.pairs)."""

from __future__ import annotations

import pytest

from harness.config.workloads import ReferenceChecksWorkload, load_workload
from harness.measure.generation import Generation
from harness.measure.prompts import TokenSpace
from harness.refcheck.judging.hit_miss import ALLOWED_FACTOR, RESOLUTION, allowed_drift, judge_hit_miss, unmeasured
from harness.refcheck.prompts.check_prompts import CheckPrompt, build_check_prompts
from harness.refcheck.send.hit_miss_send import cached_probes, load_noise, noise_path, pairs, save_noise

PROBES = [CheckPrompt("aligned384-shared256", [1] * 384, "aligned 384, cached 256", 256),
          CheckPrompt("aligned1024-full", [2] * 1024, "aligned 1024, cached whole", 1024)]


def gen(tokens: list[int], logprobs: list[float], gap: float = 2.0) -> Generation:
    top = [{t: lp, -1: lp - gap} for t, lp in zip(tokens, logprobs, strict=True)]
    return Generation(token_ids=tokens, logprobs=logprobs, top=top)


COLD = {"aligned384-shared256": gen([5, 6, 7], [-0.1, -0.2, -0.3]),
        "aligned1024-full": gen([8, 9, 10], [-0.5, -0.6, -0.7])}


def shifted(by: float, tokens: dict[str, list[int]] | None = None, gap: float = 2.0) -> dict[str, Generation]:
    return {k: gen((tokens or {}).get(k, g.token_ids), [x + by for x in g.logprobs], gap) for k, g in COLD.items()}


NOISE = pairs(PROBES, shifted(1e-5), COLD)  # the reference build: warm vs cold moved by 1e-5, no flip


def test_a_clean_candidate_within_the_reference_builds_drift_passes_and_the_allowance_is_stated():
    verdict = judge_hit_miss(pairs(PROBES, shifted(3e-5), COLD), NOISE, 0.1, "cpu-ref, prefix caching on")
    assert verdict.failures == []
    assert allowed_drift(NOISE) == pytest.approx(ALLOWED_FACTOR * 1e-5)
    assert "allowed drift 4e-05 (4 x the reference build's largest, 1e-05, over its 2 probe(s)" in verdict.statement


def test_stale_kv_fails_by_its_flip_and_by_its_drift():
    stale = pairs(PROBES, shifted(0.0, {"aligned384-shared256": [5, 11, 12]}), COLD)
    verdict = judge_hit_miss(stale, NOISE, 0.1, "cpu-ref")
    assert len(verdict.failures) == 1 and "request aligned384-shared256 [aligned 384, cached 256]" in \
        verdict.failures[0] and "token 1 differs from its cold output's (cold top-2 gap 2)" in verdict.failures[0]
    drifted = judge_hit_miss(pairs(PROBES, shifted(0.05), COLD), NOISE, 0.1, "cpu-ref")
    assert len(drifted.failures) == 2 and all("cached vs cold 0.05 > 4e-05 allowed" in f for f in drifted.failures)


def test_a_near_tie_flip_or_one_the_reference_showed_too_passes():
    flip = {"aligned1024-full": [8, 99, 10]}
    assert judge_hit_miss(pairs(PROBES, shifted(0.0, flip, gap=0.05), shifted(0.0, gap=0.05)), NOISE, 0.1,
                          "r").failures == []  # cold top-2 gap 0.05 <= tie gap 0.1
    ref_flipped = pairs(PROBES, shifted(0.0, flip), COLD)
    assert judge_hit_miss(pairs(PROBES, shifted(0.0, flip), COLD), ref_flipped, 0.1, "r").failures == []
    assert judge_hit_miss(pairs(PROBES, shifted(0.0, flip), COLD), NOISE, 0.1, "r").failures  # the planted control


def test_a_bit_exact_reference_allows_only_the_readouts_rounding():
    exact = pairs(PROBES, COLD, COLD)
    assert allowed_drift(exact) == RESOLUTION
    assert judge_hit_miss(pairs(PROBES, shifted(RESOLUTION / 2), COLD), exact, 0.1, "r").failures == []
    assert judge_hit_miss(pairs(PROBES, shifted(1e-4), COLD), exact, 0.1, "r").failures


def test_a_probe_the_reference_was_not_measured_on_cannot_pass():
    verdict = judge_hit_miss(pairs(PROBES, COLD, COLD), NOISE[:1], 0.1, "r")
    assert verdict.failures == ["hit vs miss, request aligned1024-full [aligned 1024, cached whole]: FAIL (no data: "
                                "the reference build's hit-vs-miss noise has no such probe; measure it again for this "
                                "prompt set)"]
    assert "not measured for reference 'cpu-ref'" in unmeasured("cpu-ref", "/x", "run it")


def test_the_noise_is_stored_per_reference_key_and_read_back(tmp_path):
    path = noise_path(tmp_path, "cpu-ref", "abc")
    assert load_noise(path) is None
    save_noise(path, NOISE, "cpu-ref, prefix caching on")
    assert path == tmp_path / "hit_miss" / "cpu-ref-abc.json" and load_noise(path) == (NOISE, "cpu-ref, prefix caching on")


def test_the_cached_aligned_probes_are_the_ones_compared():
    w = load_workload("reference_checks_cpu", kind=ReferenceChecksWorkload)
    prompts = build_check_prompts(w, TokenSpace(1000, frozenset()))
    assert [p.id for p in cached_probes(prompts)] == [
        "aligned384-shared256", "aligned384-full", "aligned1024-shared256", "aligned1024-full",
        "aligned2048-shared256", "aligned2048-full"]
