"""Partial-prefix reuse: warm a long prefix, then extends that share only a block-aligned part of it, mixed with
uncached prompts in one batch. The hit is proven from /metrics; every output must equal the reference arm's."""

import pytest

from harness.config.cache_unit import cache_unit
from harness.judge.checks import prefix_hit_proven
from harness.measure.metrics import cache_config, counter_total, fetch_metrics, label_int, prefix_caching_on
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.batches import BatchComparisons, compare_batches, record_fields
from harness.refcheck.compare import checked_to
from harness.refcheck.order import reorder
from harness.refcheck.prompts import expected_hit_tokens

HITS = "vllm:prefix_cache_hits_total"


def hit_counter(base_url: str) -> float | None:
    return counter_total(fetch_metrics(base_url), HITS)


def test_prefix_reuse(reference_outputs, candidate, harness_session, under_test, record):
    arm = candidate.arm
    w, prompts, sampling = under_test.check_prompts()
    check = under_test.reference_check("prefix_reuse", reference_outputs.noise_key)
    info = cache_config(fetch_metrics(candidate.info.base_url))
    block = label_int(info, "block_size") or 16
    unit = cache_unit(block, arm.parallelism.dcp, arm.parallelism.pcp)  # the scheduler's block: what a hit is made of
    caching_on = prefix_caching_on(arm.server.enable_prefix_caching, info)
    misaligned = [s for s in w.prefix_reuse.shared_tokens if s % unit]
    if misaligned:
        pytest.fail(f"workload {w.name!r}: shared_tokens {misaligned} are not multiples of arm {arm.name!r}'s "
                    f"prefix-cache unit {unit} (block_size {block} x dcp {arm.parallelism.dcp} x pcp "
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
        compared = BatchComparisons(compared.comparisons + probes.comparisons, probes.aborted)
        hits = after - before if before is not None and after is not None else None
    proof = prefix_hit_proven(arm.name, hits, expected, caching_on) if not compared.aborted else None
    fields = record_fields("prefix_reuse", reference_outputs.arm, reference_outputs.key, compared,
                           check.drift_limit, sink, [proof] if proof else [], check.tie_gap)
    judged = check.judge(fields, compared.comparisons, bool(compared.aborted))
    rec = record(ReferenceCheckRecord, arm=arm.name, of=judged.fields, cached_tokens_proven=hits,
                 checked_to_tokens=checked_to(compared.comparisons))
    assert rec.passed, (f"prefix_reuse on {arm.name!r} vs {reference_outputs.arm!r} "
                        f"(reference {reference_outputs.path}):\n" + "\n".join(rec.diverged)
                        + (f"\n{compared.aborted}" if compared.aborted else ""))
