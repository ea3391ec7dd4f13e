"""Block-aligned prefix_reuse probes (harness/refcheck/prompts/aligned_probes.py, issue 57 item 3): lengths at whole units at
several multiples, each cold, with a partial hit ending on a unit boundary and wholly cached; the probes share exactly
their planned prefix; the expected hits are whole units (the wholly cached one unit short); a length off the unit is
named; the other prompts of the set stay byte-identical when the aligned ones are added."""

from __future__ import annotations

import os

from harness.config.cache_unit import cache_unit, expected_hit
from harness.config.workloads import PrefixReuseSpec, ReferenceChecksWorkload, load_workload
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompts.aligned_probes import AlignedProbe, aligned_plan, misaligned
from harness.refcheck.prompts.check_prompts import build_check_prompts

SPACE = TokenSpace(1000, frozenset({0, 1, 2}))


def shared_prefix(a: list[int], b: list[int]) -> int:
    return len(os.path.commonprefix([a, b]))


def test_each_length_runs_cold_partial_and_wholly_cached():
    plan = aligned_plan([384, 1024, 4096], [256, 1024], prefix_tokens=3000)
    assert [(p.length, p.shared, p.mode) for p in plan] == [
        (384, 0, "cold"), (384, 256, "partial"), (384, 384, "full"),
        (1024, 0, "cold"), (1024, 256, "partial"), (1024, 1024, "full"),  # 1024 shares no 1024: not below it
        (4096, 0, "cold"), (4096, 256, "partial"), (4096, 1024, "partial")]  # past the warm prefix: no full
    assert [p.id for p in plan[:3]] == ["aligned384-cold", "aligned384-shared256", "aligned384-full"]


def test_hits_end_on_a_unit_boundary_at_several_multiples_of_the_dcp_unit():
    """On a DCP unit (64-token blocks x dcp 8 = 512; interleave adds no factor): every length is 2, 4, 8 units, the
    partial hit is exactly its share and the wholly cached one stops one unit short of the length."""
    unit = cache_unit(64, 8)
    plan = aligned_plan([1024, 2048, 4096], [512], prefix_tokens=20000)
    assert misaligned([p.length for p in plan], [512], unit) == []
    assert sorted({p.length // unit for p in plan}) == [2, 4, 8]
    for p in plan:
        hit = expected_hit(p.length, p.shared, unit)
        assert hit % unit == 0
        assert hit == {"cold": 0, "partial": p.shared, "full": p.length - unit}[p.mode]


def test_a_length_or_share_off_the_unit_is_named():
    assert misaligned([384, 1024], [256], 128) == []
    assert misaligned([384, 1024], [256], 512) == [256, 384]  # dcp8 x 64: a 256 share and a 384 length are not units


WORKLOAD = ReferenceChecksWorkload(
    name="t", seed=3, output_tokens=8,
    prefix_reuse=PrefixReuseSpec(prefix_tokens=1200, shared_tokens=[256], probes_per_share=2, uncached_probes=1,
                                 probe_suffix_tokens=(10, 40), aligned_lengths=[384, 1024]))


def test_probes_share_exactly_their_planned_prefix_and_are_whole_blocks():
    prompts = build_check_prompts(WORKLOAD, SPACE)
    aligned = [p for p in prompts.probes if p.id.startswith("aligned")]
    assert [p.id for p in aligned] == ["aligned384-cold", "aligned384-shared256", "aligned384-full",
                                      "aligned1024-cold", "aligned1024-shared256", "aligned1024-full"]
    for p in aligned:
        assert len(p.tokens) % 128 == 0 and all(t in set(SPACE.allowed()) for t in p.tokens)
        assert shared_prefix(p.tokens, prompts.warm.tokens) == p.shared_tokens, p.id


def test_the_other_prompts_stay_byte_identical():
    without = WORKLOAD.model_copy(update={"prefix_reuse": WORKLOAD.prefix_reuse.model_copy(
        update={"aligned_lengths": []})})
    a, b = build_check_prompts(WORKLOAD, SPACE), build_check_prompts(without, SPACE)
    assert a.warm == b.warm and a.rounds == b.rounds
    assert [p for p in a.probes if not p.id.startswith("aligned")] == b.probes
    assert a.fingerprint() != b.fingerprint()  # the reference key follows the prompt set


def test_the_shipped_workloads_carry_aligned_probes():
    for name in ("reference_checks_cpu", "reference_checks_kimi"):  # gpu's wait for its next recalibration
        pr = load_workload(name, kind=ReferenceChecksWorkload).prefix_reuse
        plan = aligned_plan(pr.aligned_lengths, pr.shared_tokens, pr.prefix_tokens)
        assert len({p.length for p in plan}) >= 3, name
        assert {p.mode for p in plan} == {"cold", "partial", "full"}, name
    assert AlignedProbe(8, 0, "cold").group == "aligned 8, uncached"
