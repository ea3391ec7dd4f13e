"""Every hit proof rounds with the scheduler's unit (harness/config/cache_unit.py: block_size x dcp), over the GPU DCP
arms' own YAMLs: long_context's warm and partial cells and prefix_reuse's probes expect whole units and never more
than the cache can give (judged from the tokens each request shares with what was cached before it, not from the
formula under test); the per-rank block size planted in the plan's place fails on every DCP arm; on the CPU pair
(dcp 1) the unit is the block size and the requests are the ones sent before."""

from __future__ import annotations

from functools import cache

import pytest

from harness.config.arms import load_arm
from harness.config.cache_unit import cache_unit, expected_hit, unreachable_hit
from harness.config.errors import ConfigError
from harness.config.paths import ARMS_DIR
from harness.config.workloads import LongContextWorkload, ReferenceChecksWorkload, load_workload, workload_for
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompts.aligned_probes import misaligned
from harness.refcheck.prompts.check_prompts import build_check_prompts, expected_hit_tokens
from harness.refcheck.prompts.long_context import build_long_context_prompts, build_sweep_prompts, shared_tokens
from harness.refcheck.prompts.long_context_plan import GridPlan, plan_grid

DCP_ARMS = ("gpu-dcp2", "dcp8", "tp16-dcp16")
# Per-rank block sizes the GPU arms run with: FLASH_ATTN_MLA's 16 (configs/workloads/output_coverage_gpu.yaml, read
# from an H200 server) and FlashMLA's 64 (dcp8's backend).
BLOCKS = (16, 64)
SPACE = TokenSpace(1000, frozenset({0, 1, 2}))


def shared_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@cache
def grid_prompts(arm_name: str) -> tuple[LongContextWorkload, list, list]:
    arm = load_arm(arm_name, geometry=False)
    w = load_workload(workload_for(arm, "long_context"), kind=LongContextWorkload)
    return w, build_long_context_prompts(w, SPACE).all(), build_sweep_prompts(w, SPACE, seed=0).all()


def grid_of(arm_name: str, unit: int) -> GridPlan:
    w, cells, sweep = grid_prompts(arm_name)
    return plan_grid(w, cells, sweep, True, unit, 4)


def grid_violations(plan: GridPlan, unit: int) -> list[str]:
    """Each planned hit the cache cannot give: the cached prefix is what the warm-up shares with the cell."""
    out = []
    for r in plan.sequential:
        if r.hit_expected is not None:
            cached = shared_prefix(r.warmup, r.cell.tokens)
            if why := unreachable_hit(r.hit_expected, r.cell.length, cached, unit):
                out.append(f"{r.request}: {why}")
    return out


def unit_of(arm_name: str, block: int) -> int:
    p = load_arm(arm_name, geometry=False).parallelism
    return cache_unit(block, p.dcp, p.pcp)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("arm_name", DCP_ARMS)
def test_long_context_hits_are_whole_dcp_units_the_cache_can_give(arm_name, block):
    unit = unit_of(arm_name, block)
    assert unit == block * load_arm(arm_name, geometry=False).parallelism.dcp > block
    plan = grid_of(arm_name, unit)
    proofs = [r for r in plan.sequential if r.hit_expected is not None]
    assert len(proofs) >= 2 * 6 * 3  # warm and partial of every length x depth
    assert grid_violations(plan, unit) == []
    assert all(r.hit_expected > 0 for r in proofs)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("arm_name", DCP_ARMS)
def test_the_per_rank_block_planted_as_the_unit_fails(arm_name, block):
    violations = grid_violations(grid_of(arm_name, block), unit_of(arm_name, block))
    assert violations and "not whole cache units" in violations[0]


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("arm_name", DCP_ARMS)
def test_prefix_reuse_probes_expect_only_what_a_dcp_prefix_gives(arm_name, block):
    arm = load_arm(arm_name, geometry=False)
    w = load_workload(workload_for(arm, "reference_checks"), kind=ReferenceChecksWorkload)
    prompts = build_check_prompts(w, SPACE)
    unit, cached = unit_of(arm_name, block), prompts.warm.tokens
    for p in prompts.probes:
        hit = expected_hit(len(p.tokens), p.shared_tokens, unit)
        assert unreachable_hit(hit, len(p.tokens), shared_prefix(p.tokens, cached), unit) is None, p.id
    total = expected_hit_tokens(prompts.probes, unit)
    assert total % unit == 0
    assert misaligned(w.prefix_reuse.aligned_lengths, w.prefix_reuse.shared_tokens, unit) == []
    planted = [p.id for p in prompts.probes if unreachable_hit(
        expected_hit(len(p.tokens), p.shared_tokens, block), len(p.tokens), shared_prefix(p.tokens, cached), unit)]
    # the per-rank block as the unit: each wholly cached aligned probe would expect length - block, past what a DCP
    # prefix gives (length - unit); the shares are whole units, so the other probes cannot show it
    assert planted == [p.id for p in prompts.probes if p.id.endswith("-full")]
    assert planted or not w.prefix_reuse.aligned_lengths


def test_the_kimi_workloads_before_their_fix_are_refused_on_tp16_dcp16():
    """The planted fault of the workload fix: long_context_kimi's old shortest length (0.85 x 1024 is under one
    1024-token unit) and reference_checks_gpu's 256-token share (a quarter unit) on tp16-dcp16 with FlashMLA's 64."""
    unit = unit_of("tp16-dcp16", 64)
    w, _, _ = grid_prompts("tp16-dcp16")
    old = w.model_copy(update={"lengths": [1024, *w.lengths[1:]]})
    with pytest.raises(ConfigError, match=r"0.85 of 1024 tokens is less than one prefix-cache unit \(1024"):
        plan_grid(old, build_long_context_prompts(old, SPACE).all(), [], True, unit, 4)
    gpu = load_workload("reference_checks_gpu", kind=ReferenceChecksWorkload).prefix_reuse
    assert misaligned(gpu.aligned_lengths, gpu.shared_tokens, unit) == [256]


@pytest.mark.parametrize("block", BLOCKS)
def test_every_shipped_arm_plans_its_hits_in_whole_units(block):
    """Every arm in configs/arms: its long_context grid plans (no share under a unit) and its prefix_reuse shares and
    aligned lengths are whole units of its block_size x dcp x pcp."""
    for path in sorted(ARMS_DIR.glob("*.yaml")):
        arm = load_arm(path.stem, geometry=False)
        unit = cache_unit(block, arm.parallelism.dcp, arm.parallelism.pcp)
        rc = load_workload(workload_for(arm, "reference_checks"), kind=ReferenceChecksWorkload).prefix_reuse
        assert misaligned(rc.aligned_lengths, rc.shared_tokens, unit) == [], (arm.name, unit)
        lc = load_workload(workload_for(arm, "long_context"), kind=LongContextWorkload)
        assert [shared_tokens(lc, n, unit) for n in lc.lengths], arm.name  # ConfigError where a share is under a unit


def test_a_hit_past_the_cache_or_off_the_unit_is_named():
    assert unreachable_hit(64, 1000, 848, 32) is None
    assert "not whole cache units of 32" in unreachable_hit(848, 1000, 850, 32)
    assert "exceeds the 832" in unreachable_hit(864, 1000, 850, 32)
    assert "exceeds the 992" in unreachable_hit(1024, 1000, 1000, 32)  # never the prompt's last token


def test_the_cpu_pair_keeps_its_requests_the_unit_is_its_block():
    arm = load_arm("cpu-smoke", geometry=False)
    assert (arm.parallelism.dcp, arm.parallelism.pcp) == (1, 1) and cache_unit(128, 1, 1) == 128
    w = load_workload(workload_for(arm, "long_context"), kind=LongContextWorkload)
    plan = grid_of("cpu-smoke", cache_unit(128))
    partial = {r.cell.id: shared_prefix(r.warmup, r.cell.tokens) for r in plan.sequential if r.mode == "partial"}
    assert {c: n // 128 * 128 for c, n in partial.items()} == partial  # whole 128-token blocks, as before
    assert {r.cell.length: partial[r.cell.id] for r in plan.sequential if r.mode == "partial"} == \
        {n: int(w.partial_shared * n) // 128 * 128 for n in w.lengths}
    rc = load_workload(workload_for(arm, "reference_checks"), kind=ReferenceChecksWorkload)
    probes = build_check_prompts(rc, SPACE).probes
    before = [p for p in probes if not p.id.startswith("aligned")]  # the probes sent before the aligned ones
    assert expected_hit_tokens(before, cache_unit(128)) == sum(p.shared_tokens // 128 * 128 for p in before)
    aligned = [p for p in probes if p.id.startswith("aligned")]  # wholly cached: one block short (#52897)
    assert expected_hit_tokens(aligned, 128) == sum(min(p.shared_tokens, len(p.tokens) - 128) for p in aligned)


@pytest.mark.parametrize(("arm_name", "block"), [("cpu-smoke", 128), ("gpu-dcp2", 16), ("dcp8", 16), ("dcp8", 64),
                                                 ("tp16-dcp16", 16)])
def test_block_aligned_prompts_run_cold_warm_and_partial_on_a_unit_boundary(arm_name, block):
    """Issue 57 item 3's block-aligned prompts, in the grid as it is (no request added): lengths that are whole units
    run cold, warm -- where the whole prompt is cached and the hit must stop one unit short (vLLM recomputes the last
    token: the #52897 case) -- and partial, whose shared part always ends on a unit boundary."""
    unit = unit_of(arm_name, block)
    plan = grid_of(arm_name, unit)
    aligned = sorted({r.cell.length for r in plan.sequential if r.cell.length % unit == 0})
    assert aligned, f"{arm_name}: no long_context length is a whole number of {unit}-token units"
    for r in plan.sequential:
        if r.cell.length in aligned and r.mode == "warm":
            assert r.hit_expected == r.cell.length - unit
        if r.mode == "partial":
            assert shared_prefix(r.warmup, r.cell.tokens) % unit == 0 and r.hit_expected % unit == 0
    assert {r.mode for r in plan.sequential if r.cell.length in aligned} >= {"cold", "warm", "partial"}
