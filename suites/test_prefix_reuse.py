"""Partial-prefix reuse: warm a long prefix, then extends that share only a block-aligned part of it, mixed with
uncached prompts and block-aligned probes in one batch. The hit is proven from /metrics; every output must equal the
reference arm's, and each aligned cached probe its own cold send within the reference build's hit-vs-miss drift."""

import pytest

from harness.config.cache_unit import cache_unit
from harness.judge.checks import prefix_hit_proven
from harness.measure.metrics import cache_config, counter_total, fetch_metrics, label_int, prefix_caching_on
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.judging.compare import checked_to
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields
from harness.refcheck.judging.hit_miss import HitMissVerdict, judge_hit_miss, unmeasured
from harness.refcheck.prompt_sets.check_set import CHECKS
from harness.refcheck.prompts.aligned_probes import misaligned
from harness.refcheck.prompts.check_prompts import expected_hit_tokens
from harness.refcheck.prompts.order import reorder
from harness.refcheck.send.batches import compare_batches
from harness.refcheck.send.hit_miss_send import cached_probes, load_noise, noise_path, pairs, send_cold
from harness.refcheck.store.reference_store import reference_dir

HITS = "vllm:prefix_cache_hits_total"


def hit_counter(base_url: str) -> float | None:
    return counter_total(fetch_metrics(base_url), HITS)


def test_prefix_reuse(reference_outputs, candidate, harness_session, under_test, record):
    arm = candidate.arm
    w, prompts, sampling = under_test.prompt_set(CHECKS)
    check = under_test.reference_check("prefix_reuse", reference_outputs.noise_key)
    info = cache_config(fetch_metrics(candidate.info.base_url))
    block = label_int(info, "block_size") or 16
    unit = cache_unit(block, arm.parallelism.dcp, arm.parallelism.pcp)  # the scheduler's block: what a hit is made of
    caching_on = prefix_caching_on(arm.server.enable_prefix_caching, info)
    off_unit = misaligned(w.prefix_reuse.aligned_lengths, w.prefix_reuse.shared_tokens, unit)
    if off_unit:
        pytest.fail(f"workload {w.name!r}: shared_tokens / aligned_lengths {off_unit} are not multiples of arm "
                    f"{arm.name!r}'s prefix-cache unit {unit} (block_size {block} x dcp {arm.parallelism.dcp} x pcp "
                    f"{arm.parallelism.pcp}): set them to whole units", pytrace=False)
    sink = harness_session.run_dir / arm.name / "prefix_reuse_comparisons.jsonl"
    sink.unlink(missing_ok=True)

    compared = compare_batches(candidate, [[prompts.warm]], sampling, reference_outputs.outputs, sink)
    hits = None
    expected = expected_hit_tokens(prompts.probes, unit)
    if not compared.aborted:
        before = hit_counter(candidate.info.base_url)
        probes = compare_batches(candidate, [reorder(prompts.probes, harness_session.order_seed)], sampling,
                                 reference_outputs.outputs, sink)
        after = hit_counter(candidate.info.base_url)
        compared = BatchComparisons(compared.comparisons + probes.comparisons, probes.aborted,
                                    generations=probes.generations)
        hits = after - before if before is not None and after is not None else None
    proof = prefix_hit_proven(arm.name, hits, expected, caching_on) if not compared.aborted else None
    hit_miss = (hit_vs_miss(candidate, prompts, sampling, compared, reference_outputs, check, sink)
                if caching_on and not compared.aborted else HitMissVerdict("", []))
    fields = record_fields("prefix_reuse", reference_outputs.arm, reference_outputs.key, compared,
                           check.drift_limit, sink, [*([proof] if proof else []), *hit_miss.failures], check.tie_gap)
    if hit_miss.statement:
        fields = fields.model_copy(update={"detail": f"{fields.detail}; {hit_miss.statement}"})
    judged = check.judge(fields, compared.comparisons, bool(compared.aborted))
    rec = record(ReferenceCheckRecord, arm=arm.name, of=judged.fields, cached_tokens_proven=hits,
                 checked_to_tokens=checked_to(compared.comparisons))
    assert rec.passed, (f"prefix_reuse on {arm.name!r} vs {reference_outputs.arm!r} "
                        f"(reference {reference_outputs.path}):\n" + "\n".join(rec.diverged)
                        + (f"\n{compared.aborted}" if compared.aborted else ""))


def hit_vs_miss(candidate, prompts, sampling, compared, reference_outputs, check, sink) -> HitMissVerdict:
    """The aligned cached probes sent cold to the candidate, each pair judged against the reference build's stored
    hit-vs-miss noise (harness/refcheck/judging/hit_miss.py); the pairs kept beside the comparisons."""
    probes = [p for p in cached_probes(prompts) if p.id in compared.generations]
    if not probes:
        return HitMissVerdict("", [])
    cold = send_cold(candidate, probes, sampling, "prefix-reuse")
    got = pairs(probes, compared.generations, cold)
    sink.with_name("prefix_reuse_hit_miss.jsonl").write_text("".join(c.model_dump_json() + "\n" for c in got))
    path = noise_path(reference_dir(), reference_outputs.arm, reference_outputs.noise_key)
    stored = load_noise(path)
    if stored is None:
        said = unmeasured(reference_outputs.arm, path, "python -m harness.refcheck.send.hit_miss_send --reference "
                          f"{reference_outputs.arm} --candidate {candidate.arm.name}")
        return HitMissVerdict(said, [f"FAIL (no data: {said})"] if check.limits.require_floor else [])
    noise, measured_on = stored
    return judge_hit_miss(got, noise, check.tie_gap, measured_on)
