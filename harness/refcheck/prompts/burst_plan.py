"""The long_context grid's bursts (pure): which cells go out together. At every length, all its depths at once; then
mixed-length bursts of 2, 4, ... and `max_batch` requests (the arm's max_num_seqs, capped by the grid's size), short
and long cells together, drawn round-robin over the lengths so every burst mixes them. A batch-only fault (one that
needs two long sequences decoding in one step) shows here and nowhere in the one-at-a-time grid (bursts.py judges).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.refcheck.prompts.long_context import ContextCell


@dataclass(frozen=True)
class Burst:
    """Cells sent at once (each cold, under a salt of the burst's own); `name` says which ("L4000 depths", "mixed
    4") in the comparisons' ids, the salt and the failures."""

    name: str
    cells: list[ContextCell]

    @property
    def where(self) -> str:
        """Where an abort says the grid stopped."""
        return f"burst {self.name}"


def mixed_sizes(max_batch: int) -> list[int]:
    """2, 4, 8, ... below max_batch, then max_batch itself."""
    sizes, n = [], 2
    while n < max_batch:
        sizes.append(n)
        n *= 2
    return [*sizes, max_batch] if max_batch >= 2 else []


def round_robin(cells: list[ContextCell]) -> list[ContextCell]:
    """The cells interleaved over lengths (shortest first in each round), so any prefix mixes short and long."""
    by_length: dict[int, list[ContextCell]] = {}
    for c in cells:
        by_length.setdefault(c.length, []).append(c)
    columns = [by_length[n] for n in sorted(by_length)]
    return [col[i] for i in range(max(map(len, columns), default=0)) for col in columns if i < len(col)]


def burst_plan(cells: list[ContextCell], max_batch: int) -> list[Burst]:
    """Each length's depths together, then the mixed-length bursts."""
    plan = []
    for length in sorted({c.length for c in cells}):
        at = [c for c in cells if c.length == length]
        if len(at) >= 2:
            plan.append(Burst(f"L{length} depths", at))
    mixed = round_robin(cells)
    for n in mixed_sizes(min(max_batch, len(mixed))):
        plan.append(Burst(f"mixed {n}", mixed[:n]))
    return plan
