"""The prefix cache's unit and the hits it can give (pure): one function every hit proof rounds with.

Under context parallelism the scheduler hashes in blocks of the per-rank block_size x dcp x pcp; the interleave adds
no factor. vLLM's source for each: docs/suites.md ("The prefix cache's unit in every hit proof").
"""

from __future__ import annotations


def cache_unit(block_size: int, dcp: int = 1, pcp: int = 1) -> int:
    """Tokens of one prefix-cache block as the scheduler counts, hashes and hits them (dcp 1, pcp 1: block_size)."""
    return block_size * dcp * pcp


def expected_hit(prompt_tokens: int, cached_prefix: int, unit: int) -> int:
    """Prefix-cache hit tokens a request must show: whole cache units of the cached prefix, and never the prompt's
    last token (vLLM recomputes it to sample from). `unit`: cache_unit's, not the per-rank block size."""
    return min(cached_prefix, prompt_tokens - 1) // unit * unit


def unreachable_hit(expected: int, prompt_tokens: int, cached_prefix: int, unit: int) -> str | None:
    """Why a hit proof expecting `expected` tokens asks what the cache cannot give (a sentence), or None: a hit is
    whole units, and at most the units the cached prefix fills short of the prompt's last token."""
    can = 0
    while can + unit <= min(cached_prefix, prompt_tokens - 1):
        can += unit
    if expected % unit:
        return f"expected hit {expected} tokens is not whole cache units of {unit} (block_size x dcp x pcp)"
    if expected > can:
        return (f"expected hit {expected} tokens exceeds the {can} a {prompt_tokens}-token prompt sharing "
                f"{cached_prefix} cached tokens can hit in units of {unit}")
    return None
