"""Another batch composition and arrival order per seed: the same prompts and round sizes, reproducible, seed 0 the
canonical order."""

from harness.refcheck.prompts.check_prompts import CheckPrompt
from harness.refcheck.prompts.order import reorder, reorder_rounds


def rounds() -> list[list[CheckPrompt]]:
    sizes = [1, 2, 4, 8, 3]
    return [[CheckPrompt(f"r{r}b{n}-{i}", [r, i], f"round {r} (batch {n})") for i in range(n)]
            for r, n in enumerate(sizes)]


def test_seed_zero_is_the_canonical_order():
    assert reorder_rounds(rounds(), 0) == rounds()
    flat = [p for r in rounds() for p in r]
    assert reorder(flat, 0) == flat


def test_another_seed_keeps_prompts_and_sizes_and_changes_who_is_batched_with_whom():
    canonical = rounds()
    shuffled = reorder_rounds(canonical, 3)
    assert sorted(len(r) for r in shuffled) == sorted(len(r) for r in canonical)
    assert sorted(p.id for r in shuffled for p in r) == sorted(p.id for r in canonical for p in r)
    together = {frozenset(p.id for p in r) for r in canonical}
    assert {frozenset(p.id for p in r) for r in shuffled} != together
    assert reorder_rounds(canonical, 3) == shuffled  # reproducible from the seed
    assert reorder_rounds(canonical, 4) != shuffled
    flat = [p for r in canonical for p in r]
    assert reorder(flat, 3) != flat and sorted(p.id for p in reorder(flat, 3)) == sorted(p.id for p in flat)
