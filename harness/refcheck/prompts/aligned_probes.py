"""Block-aligned prefix_reuse probes (pure, issue 57 item 3): prompts whose length is a whole number of prefix-cache
units, sent cold, with a partial hit that ends on a unit boundary, and wholly cached (the hit must stop one unit
short: vLLM recomputes the last token, vLLM #52897). The lengths come from the workload; a length or share that is
not whole units of an arm's unit (harness/config/cache_unit.py) is named by `misaligned`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class AlignedProbe:
    """One planned probe: `length` tokens, the first `shared` of them the warm prompt's prefix (0: cold)."""

    length: int
    shared: int
    mode: str  # "cold", "partial" (shares a workload share below its length) or "full" (shares all of it)

    @property
    def id(self) -> str:
        return f"aligned{self.length}-" + {"cold": "cold", "full": "full"}.get(self.mode, f"shared{self.shared}")

    @property
    def group(self) -> str:
        return f"aligned {self.length}, " + {"cold": "uncached", "full": "cached whole"}.get(
            self.mode, f"cached {self.shared}")


def aligned_plan(lengths: list[int], shares: list[int], prefix_tokens: int) -> list[AlignedProbe]:
    """Each length cold, sharing every workload share below it, and wholly cached where the warm prefix covers it."""
    out = []
    for n in lengths:
        out.append(AlignedProbe(n, 0, "cold"))
        out += [AlignedProbe(n, s, "partial") for s in sorted(set(shares)) if s < n]
        if n <= prefix_tokens:
            out.append(AlignedProbe(n, n, "full"))
    return out


def aligned_tokens(plan: list[AlignedProbe], prefix: list[int], allowed: list[int], seed: int) -> list[list[int]]:
    """Each probe's tokens from its own generator (the workload's other prompts stay byte-identical): the shared
    prefix, then fresh tokens whose first differs from the prefix's next, so a probe shares exactly `shared`."""
    rng = random.Random(f"aligned-{seed}")
    out = []
    for p in plan:
        tokens = prefix[:p.shared]
        if p.shared < p.length:
            nxt = prefix[p.shared] if p.shared < len(prefix) else None
            tokens = tokens + [rng.choice([t for t in allowed[:64] if t != nxt])]
            tokens += rng.choices(allowed, k=p.length - len(tokens))
        out.append(tokens)
    return out


def misaligned(lengths: list[int], shares: list[int], unit: int) -> list[int]:
    """The lengths and shares that are not whole prefix-cache units of `unit` (block_size x dcp x pcp)."""
    return [n for n in [*shares, *lengths] if n % unit]
