"""The long_context grid builder and cell judging (pure): depths, ids, fingerprint, token exclusions, fits; exact
pass, a planted divergence at one length fails naming that first failing length, a retrieval drop fails."""

from __future__ import annotations

import json

import pytest

from harness.config.cache_unit import expected_hit
from harness.config.errors import ConfigError
from harness.config.workloads import LongContextWorkload, load_workload
from harness.measure.generation import Generation
from harness.measure.prompts import TokenSpace
from harness.refcheck.judging.compare import compare_outputs
from harness.refcheck.judging.long_context_cells import (
    CellOutput,
    checked_to_tokens,
    first_failing_length,
    grid_summary,
    judge_forced,
    judge_generation,
)
from harness.refcheck.judging.teacher_forcing import compare_forced
from harness.refcheck.prompts.long_context import (
    build_long_context_prompts,
    build_sweep_prompts,
    partial_warmup,
    read_needle_tokens,
    shared_tokens,
    span_start,
    sweep_lengths,
)
from tests.cell_limits import cell_limits

SPACE = TokenSpace(512, frozenset({0, 1, 2}))
LIMITS = cell_limits(0.01, 0.0, 0.1)


def workload(**kw) -> LongContextWorkload:
    base = {"name": "t", "lengths": [128, 256], "depths": [0.0, 0.5, 1.0], "span_tokens": 12, "cue_tokens": 4,
            "output_tokens": 8}
    return LongContextWorkload.model_validate({**base, **kw})


def test_grid_places_the_span_at_each_depth_and_cues_it_at_the_end():
    p = build_long_context_prompts(workload(), SPACE)
    assert [c.id for c in p.cells] == ["L128-d0", "L128-d0.5", "L128-d1", "L256-d0", "L256-d0.5", "L256-d1"]
    for c in p.cells:
        assert len(c.tokens) == c.length
        span = c.tokens[c.span_at:c.span_at + 12]
        assert len(set(span)) == 12, "needle tokens are distinct"
        assert c.tokens[-4:] == span[:4] and c.expected == span[4:]
        assert c.span_at == span_start(c.length, c.depth, 12, 4)
        # the cue occurs once before the end: filler never uses a span token
        assert not set(c.tokens[:c.span_at] + c.tokens[c.span_at + 12:-4]) & set(span)
        assert not set(c.tokens) & SPACE.excluded
    assert [c.span_at for c in p.cells[:3]] == [0, 56, 112]  # room before the cue: 128 - 4 - 12
    assert p.cells[2].span_at + 12 == 128 - 4, "depth 1 ends right before the cue"


def test_grid_is_deterministic_and_its_fingerprint_sees_every_change():
    a, b = build_long_context_prompts(workload(), SPACE), build_long_context_prompts(workload(), SPACE)
    assert a.fingerprint() == b.fingerprint() and a.cells == b.cells
    assert build_long_context_prompts(workload(seed=1), SPACE).fingerprint() != a.fingerprint()
    more = build_long_context_prompts(workload(lengths=[128, 256, 300]), SPACE)
    assert more.cells[:6] == a.cells, "adding a length leaves the other cells byte-identical"
    assert more.fingerprint() != a.fingerprint()


def test_needles_come_from_the_workload_then_the_model_dir_else_the_vocabulary(tmp_path):
    needles = list(range(400, 440))
    published = build_long_context_prompts(workload(), SPACE, needles)
    assert published.needle_source == "tiny_model.json needle_tokens (40 ids)"
    for c in published.cells:
        assert set(c.tokens[c.span_at:c.span_at + 12]) <= set(needles)
        assert not set(c.tokens[:c.span_at]) & set(needles), "filler never uses a needle token"
    own = build_long_context_prompts(workload(needle_token_ids=list(range(100, 120))), SPACE, needles)
    assert own.needle_source.startswith("workload needle_token_ids")
    assert build_long_context_prompts(workload(), SPACE).needle_source == "the ordinary token space"
    (tmp_path / "tiny_model.json").write_text(json.dumps({"needle_tokens": needles, "seed": 0}))
    assert read_needle_tokens(tmp_path) == needles
    (tmp_path / "tiny_model.json").write_text(json.dumps({"seed": 0}))
    assert read_needle_tokens(tmp_path) is None and read_needle_tokens(tmp_path / "absent") is None
    (tmp_path / "tiny_model.json").write_text(json.dumps({"needle_tokens": "abc"}))
    with pytest.raises(ConfigError, match="needle_tokens must be a list"):
        read_needle_tokens(tmp_path)


def test_unusable_needles_name_the_field():
    with pytest.raises(ConfigError, match=r"outside the usable vocabulary .*fix needle_token_ids"):
        build_long_context_prompts(workload(needle_token_ids=[1, *range(100, 120)]), SPACE)
    with pytest.raises(ConfigError, match=r"has 5 distinct ids, the span needs 12: fix needle_tokens"):
        build_long_context_prompts(workload(), SPACE, [10, 11, 12, 13, 14])


def test_workload_is_strict_and_fits_are_checked():
    with pytest.raises(ValueError, match="output_tokens 4 < span_tokens - cue_tokens 8"):
        workload(output_tokens=4)
    with pytest.raises(ValueError, match="cue_tokens 12 must be below span_tokens 12"):
        workload(cue_tokens=12)
    with pytest.raises(ValueError, match="lengths .16. cannot hold"):
        workload(lengths=[16, 256])
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        workload(lenghts=[1])
    with pytest.raises(ValueError, match="partial_shared 256 tokens must be below the shortest length 128"):
        workload(partial_shared=256)
    with pytest.raises(ValueError, match="bursts compare each cell with its cold output sent alone"):
        workload(modes=["warm"])
    assert workload(modes=["warm"], bursts=False).modes == ["warm"]
    cpu = load_workload("long_context_cpu", kind=LongContextWorkload)
    assert cpu.max_len <= 4096 and cpu.prompt_tokens == 4000, "the CPU pair's max_model_len"
    for name, limit in (("long_context_gpu", 40960), ("long_context_gpu_120k", 122880),
                        ("long_context_kimi", 262144)):
        assert load_workload(name, kind=LongContextWorkload).max_len <= limit, name


def test_partial_warmup_shares_whole_blocks_and_then_differs():
    w = workload(lengths=[1000])
    cell = build_long_context_prompts(w, SPACE).cells[1]
    shared = shared_tokens(w, 1000, 128)
    assert shared == 384  # 0.5 x 1000 = 500, rounded down to whole 128-token blocks
    warm = partial_warmup(cell, shared)
    assert warm[:shared] == cell.tokens[:shared] and warm[shared] != cell.tokens[shared]
    assert len(warm) <= cell.length
    assert expected_hit(1000, shared, 128) == 384 and expected_hit(1024, 1024, 128) == 896
    with pytest.raises(ConfigError, match="partial_shared 100 is not a multiple of the arm's prefix-cache unit 128"):
        shared_tokens(workload(partial_shared=100), 128, 128)
    with pytest.raises(ConfigError, match="less than one prefix-cache unit"):
        shared_tokens(workload(partial_shared=0.1), 128, 128)


def gen(tokens: list[int], lp: float = -0.1, gap: float = 2.0) -> Generation:
    return Generation(list(tokens), [lp] * len(tokens), [{t: lp, t + 1: lp - gap} for t in tokens])


def judged_grid(diverge_from: int | None = None, copy_wrong_from: int | None = None):
    """Every cell of a two-length grid judged; the candidate diverges (at its second token) on cells at or past
    `diverge_from`, or copies nothing of the span past `copy_wrong_from` while the reference copies it."""
    w = workload()
    cells = []
    for cell in build_long_context_prompts(w, SPACE).cells:
        ref = gen(cell.expected)
        cand = ref
        if diverge_from is not None and cell.length >= diverge_from:
            cand = gen([cell.expected[0], 3, *cell.expected[2:]])
        for mode in ("cold", "warm", "partial"):
            c = compare_outputs(f"{cell.id}-{mode}", cell.length, cand, ref, cell.group)
            toks = cand.token_ids
            if copy_wrong_from is not None and cell.length >= copy_wrong_from:
                toks = [3] * len(toks)
            hit = expected_hit(cell.length, cell.length, 16) if mode == "warm" else None
            cells.append(judge_generation(CellOutput(cell, c, toks, ref.token_ids), mode, LIMITS, hit,
                                          hit if mode == "warm" else None))
        forced = compare_forced(f"{cell.id}-forced", cell.length, ref, ref, cell.group)
        cells.append(judge_forced(cell, forced, LIMITS))
    return cells


def test_an_exact_grid_passes_and_states_how_far_it_checked():
    cells = judged_grid()
    assert all(c.passed for c in cells) and len(cells) == 24
    assert first_failing_length(cells) is None
    assert checked_to_tokens(cells) == 256 + 8
    assert grid_summary(cells, 24) == ("24/24 cells pass (cold 6/6, warm 6/6, partial 6/6, forced 6/6); outputs "
                                       "checked to 264 tokens")


def test_a_divergence_only_past_a_length_fails_naming_that_first_failing_length():
    cells = judged_grid(diverge_from=256)
    assert first_failing_length(cells) == 256
    assert all(c.passed for c in cells if c.length == 128)
    bad = [c for c in cells if not c.passed]
    assert {c.mode for c in bad} == {"cold", "warm", "partial"} and all(c.first_divergence == 1 for c in bad)
    assert "generated token 1 differs from the reference" in bad[0].failures[0]
    assert checked_to_tokens(cells) == 256 + 8  # the forced cells scored every reference token
    assert "first failing length 256 tokens (d0 cold, d0 partial, d0 warm, d0.5 cold" in grid_summary(cells, 24)


def test_a_retrieval_drop_fails_even_where_tokens_are_not_compared_exactly():
    cells = judged_grid(copy_wrong_from=256)
    bad = [c for c in cells if not c.passed]
    assert bad and all(c.length == 256 and c.retrieval_candidate == 0.0 and c.retrieval_reference == 1.0 for c in bad)
    assert "retrieval accuracy 0.00 < reference 1.00 - margin 0.1" in bad[0].failures[0]
    assert first_failing_length(cells) == 256


def test_an_unproven_warm_hit_fails_and_caching_off_is_not_judged():
    cell = build_long_context_prompts(workload(), SPACE).cells[0]
    ref = gen(cell.expected)
    c = compare_outputs("x", 128, ref, ref)
    out = CellOutput(cell, c, ref.token_ids, ref.token_ids)
    short = judge_generation(out, "warm", LIMITS, 0.0, 112)
    assert not short.passed and "warm: prefix-cache hits 0 tokens < 112 expected" in short.failures[0]
    gone = judge_generation(out, "warm", LIMITS, None, 112)
    assert "no vllm:prefix_cache_hits counter" in gone.failures[0]
    off = judge_generation(out, "warm", LIMITS, None, None)
    assert off.passed


def test_sweep_adds_evenly_spaced_lengths_and_a_seeded_one_in_every_gap_of_the_grid():
    w = workload(lengths=[512, 1024, 2048, 4000], sweep_lengths=16, jitter_per_gap=1)
    dense, jitter = sweep_lengths(w, seed=7)
    assert len(dense) == 16 and dense == sorted(dense) and 512 < dense[0] and dense[-1] < 4000
    steps = {b - a for a, b in zip(dense, dense[1:], strict=False)}
    assert max(steps) - min(steps) <= 1  # evenly spaced
    assert [sum(a < n < b for n in jitter) for a, b in ((512, 1024), (1024, 2048), (2048, 4000))] == [1, 1, 1]
    assert sweep_lengths(w, seed=7) == (dense, jitter)  # the seed reproduces them
    others = {tuple(sweep_lengths(w, seed=s)[1]) for s in range(1, 21)}
    assert len(others) >= 15  # another seed, other lengths: the nights cover the gaps
    assert not set(dense + jitter) & set(w.lengths)


def test_sweep_cells_are_the_grids_recipe_at_one_depth_and_none_without_a_sweep():
    w = workload(lengths=[512, 1024, 2048], sweep_lengths=4, jitter_per_gap=1, sweep_depth=0.5)
    cells = build_sweep_prompts(w, SPACE, seed=3).all()
    dense, jitter = sweep_lengths(w, 3)
    assert [c.length for c in cells] == sorted(dense + jitter) and {c.depth for c in cells} == {0.5}
    assert all(len(c.tokens) == c.length and c.id == f"L{c.length}-d0.5" for c in cells)
    none = workload(lengths=[512, 1024], sweep_lengths=0, jitter_per_gap=0)
    assert build_sweep_prompts(none, SPACE, seed=3).all() == []
