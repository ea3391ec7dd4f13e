"""The reference checks' deterministic prompt set (pure): the same workload and vocabulary give the same prompts.

Every prompt has a stable id; the reference store keeps one output per id, and the checks send the same ids to the
candidate in their own order and batching.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

from harness.config.cache_unit import expected_hit
from harness.config.workloads import PrefixReuseSpec, ReferenceChecksWorkload
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompts.aligned_probes import aligned_plan, aligned_tokens
from harness.tinymodel.copytask import copy_prompt


@dataclass(frozen=True)
class CheckPrompt:
    id: str
    tokens: list[int]
    group: str  # what the check varies for this prompt: "warm", "cached 256", "uncached", "round 3 (batch 5)"
    shared_tokens: int = 0  # prefix_reuse: tokens shared with the warm prompt's prefix


@dataclass(frozen=True)
class CheckPrompts:
    warm: CheckPrompt  # prefix_reuse: the long prompt that fills the cache
    probes: list[CheckPrompt]  # prefix_reuse: cached and uncached extends, interleaved, sent as one batch
    rounds: list[list[CheckPrompt]]  # graph_replay: one list per round, sent concurrently

    def all(self) -> list[CheckPrompt]:
        return [self.warm, *self.probes, *(p for r in self.rounds for p in r)]

    def fingerprint(self) -> str:
        """Hash of every id and token: part of the reference key."""
        h = hashlib.sha256()
        for p in self.all():
            h.update(json.dumps([p.id, p.tokens]).encode())
        return h.hexdigest()[:16]


def prompt_sha(tokens: list[int]) -> str:
    return hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16]


def build_check_prompts(w: ReferenceChecksWorkload, space: TokenSpace) -> CheckPrompts:
    allowed = space.allowed()
    rng = random.Random(w.seed)
    pr = w.prefix_reuse
    prefix = rng.choices(allowed, k=pr.prefix_tokens)
    warm = CheckPrompt("warm", prefix + rng.choices(allowed, k=pr.warm_suffix_tokens), "warm")

    def fresh_after(shared: int, length: int) -> list[int]:
        # The first new token must differ from the prefix's, or the probe would share one token more.
        first = rng.choice([t for t in allowed[:64] if shared >= len(prefix) or t != prefix[shared]])
        return [first, *rng.choices(allowed, k=length - 1)]

    cached, uncached = [], []
    for shared in pr.shared_tokens:
        for i in range(pr.probes_per_share):
            n = rng.randint(*pr.probe_suffix_tokens)
            cached.append(CheckPrompt(f"shared{shared}-{i}", prefix[:shared] + fresh_after(shared, n),
                                      f"cached {shared}", shared))
    for i in range(pr.uncached_probes):
        n = rng.randint(*pr.probe_suffix_tokens)
        uncached.append(CheckPrompt(f"uncached-{i}", fresh_after(0, n), "uncached"))
    probes = interleave(cached, uncached) + aligned_probes(pr, prefix, allowed, w.seed)

    rounds = []
    for r, size in enumerate(w.graph_replay.batch_sizes):
        lengths = [rng.randint(*w.graph_replay.prompt_tokens) for _ in range(size)]
        rounds.append([CheckPrompt(f"r{r}b{size}-{i}", rng.choices(allowed, k=n), f"round {r} (batch {size})")
                       for i, n in enumerate(lengths)])
    if w.copy_prompts:
        rounds.append(copy_round(w, allowed))
    return CheckPrompts(warm, probes, rounds)


def aligned_probes(pr: PrefixReuseSpec, prefix: list[int], allowed: list[int], seed: int) -> list[CheckPrompt]:
    """The block-aligned probes (harness/refcheck/prompts/aligned_probes.py), after the others in the same batch."""
    plan = aligned_plan(pr.aligned_lengths, pr.shared_tokens, len(prefix))
    return [CheckPrompt(p.id, tokens, p.group, p.shared)
            for p, tokens in zip(plan, aligned_tokens(plan, prefix, allowed, seed), strict=True)]


def copy_round(w: ReferenceChecksWorkload, allowed: list[int]) -> list[CheckPrompt]:
    """The copy prompts, from their own generator (the other prompts stay byte-identical when they are added)."""
    c = w.copy_prompts
    rng = random.Random(f"copy-{w.seed}")
    out = []
    for n in c.context_tokens:
        for i in range(c.prompts_per_length):
            tokens, _ = copy_prompt(rng, allowed, n, c.span_tokens, c.cue_tokens, c.span_at)
            out.append(CheckPrompt(f"copy{n}-{i}", tokens, f"copy (span at {c.span_at} of {n})"))
    return out


def interleave(a: list, b: list) -> list:
    """a0 b0 a1 b1 …: cached and uncached extends side by side in the same batch."""
    out = []
    for i in range(max(len(a), len(b))):
        out += a[i:i + 1] + b[i:i + 1]
    return out


def expected_hit_tokens(probes: list[CheckPrompt], unit: int) -> int:
    """Prefix-cache hits the probes must produce: each cached extend reuses its shared part in whole prefix-cache
    units (harness/config/cache_unit.py: block_size x dcp, never the per-rank block size under DCP)."""
    return sum(expected_hit(len(p.tokens), p.shared_tokens, unit) for p in probes)
