"""The grid's bursts (pure): which cells go out together, and a burst output judged against the reference and against
the candidate's own output alone, so a batch-only divergence fails even where the reference agrees, and a tie flip
does not."""

from __future__ import annotations

from harness.measure.generation import Generation
from harness.refcheck.judging.bursts import VsAlone, batch_invariance, judge_burst
from harness.refcheck.judging.compare import compare_outputs
from harness.refcheck.judging.long_context_cells import CellOutput
from harness.refcheck.prompts.burst_plan import burst_plan, mixed_sizes, round_robin
from harness.refcheck.prompts.long_context import ContextCell
from tests.cell_limits import cell_limits


def cell(length: int, depth: float) -> ContextCell:
    return ContextCell(f"L{length}-d{depth:g}", [1] * length, f"length {length}, depth {depth:g}", length, depth, 0,
                       [7, 8, 9])


CELLS = [cell(n, d) for n in (512, 1024, 2048, 4000) for d in (0.05, 0.5, 0.95)]


def gen(tokens: list[int], lp: float = -0.1, gap: float = 2.0) -> Generation:
    return Generation(list(tokens), [lp] * len(tokens), [{t: lp, t + 100: lp - gap} for t in tokens])


def test_every_length_bursts_its_depths_and_mixed_bursts_mix_lengths_up_to_max_batch():
    plan = {b.name: b.cells for b in burst_plan(CELLS, max_batch=16)}
    assert [len(plan[f"L{n} depths"]) for n in (512, 1024, 2048, 4000)] == [3, 3, 3, 3]
    assert [k for k in plan if k.startswith("mixed")] == ["mixed 2", "mixed 4", "mixed 8", "mixed 12"]
    assert [c.length for c in plan["mixed 4"]] == [512, 1024, 2048, 4000]  # short and long together
    assert sum(c.length == 4000 for c in plan["mixed 8"]) == 2
    assert mixed_sizes(12) == [2, 4, 8, 12] and mixed_sizes(8) == [2, 4, 8] and mixed_sizes(1) == []
    assert len(round_robin(CELLS)) == len(CELLS)
    assert [b.name for b in burst_plan(CELLS, max_batch=3)][-2:] == ["mixed 2", "mixed 3"]  # the arm's max_num_seqs


def judged(burst: Generation, alone: Generation, ref: Generation):
    c = cell(4000, 0.5)
    vs_ref = compare_outputs("L4000-d0.5-burst", 4000, burst, ref, c.group)
    vs_alone = compare_outputs("L4000-d0.5-burst-vs-alone", 4000, burst, alone, c.group)
    out = CellOutput(c, vs_ref, burst.token_ids, ref.token_ids)
    return judge_burst(out, vs_alone, "L4000 depths", 3, cell_limits(0.25, 0.1, 0.25)), vs_alone


def test_a_burst_output_equal_to_both_passes():
    out, _ = judged(gen([7, 8, 9]), gen([7, 8, 9]), gen([7, 8, 9]))
    assert out.passed and out.exact and out.alone_exact and out.batch == 3 and out.mode == "burst"


def test_a_batch_only_divergence_fails_against_the_reference_and_against_itself_alone():
    out, _ = judged(gen([7, 5, 5]), gen([7, 8, 9]), gen([7, 8, 9]))
    assert not out.passed and out.first_divergence == 1 and out.alone_first_divergence == 1
    assert any("vs the reference" in f for f in out.failures)
    assert any("vs its own output alone" in f and "3 in flight" in f for f in out.failures)
    assert any("retrieval accuracy" in f for f in out.failures)


def test_a_batch_divergence_the_reference_shares_still_fails_batch_invariance():
    # the reference cannot tell (it also says 7, 5, 5), but the candidate alone said 7, 8, 9
    out, _ = judged(gen([7, 5, 5]), gen([7, 8, 9]), gen([7, 5, 5]))
    assert not out.passed and out.exact and out.alone_exact is False
    assert [f for f in out.failures if "vs the reference" in f] == []


def test_a_tie_flip_against_itself_alone_is_not_a_failure():
    tied_alone = gen([7, 8, 9], gap=0.05)  # the candidate alone could hardly tell its token 1 from another
    out, vs_alone = judged(gen([7, 8, 9]), tied_alone, gen([7, 8, 9]))
    flipped, _ = judged(Generation([7, 108, 9], [-0.1] * 3, [{7: -0.1}, {108: -0.1, 8: -0.12}, {9: -0.1}]),
                        tied_alone, Generation([7, 108, 9], [-0.1] * 3, [{7: -0.1}, {108: -0.1}, {9: -0.1}]))
    assert out.passed and flipped.passed and flipped.alone_exact is False


def test_batch_invariance_rows_per_batch_size():
    same = compare_outputs("a", 512, gen([1, 2]), gen([1, 2]))
    differs = compare_outputs("b", 4000, gen([1, 3]), gen([1, 2]))
    tie = compare_outputs("c", 4000, gen([1, 3]), gen([1, 2], gap=0.05))
    compared = [VsAlone(2, 512, same), VsAlone(3, 4000, differs), VsAlone(3, 4000, tie)]
    rows = {r.batch: r for r in batch_invariance(compared, cell_limits(0.25, 0.1, 0.0))}
    assert (rows[2].requests, rows[2].exact, rows[2].failed) == (1, 1, 0)
    assert (rows[3].requests, rows[3].exact, rows[3].tie_flips, rows[3].failed) == (2, 0, 1, 1)
    assert rows[3].first_divergence_min == 1 and rows[3].lengths == [4000]
