"""Concurrent mixed-length prefills (issue 57 item 4): prompts from a few tokens to near max_model_len, some partial
prefix hits, sent together, so the scheduler puts prefills of very different lengths (and cached offsets) in one step;
each output is compared with the reference's output of the same prompt sent alone. A kernel that reads another
request's block-table tail or KV in a mixed batch (vLLM #39589, FA2 #42494) changes exactly these outputs.

The prompts are random tokens of the arm's usable vocabulary, one generator per cell id (a cell's prompt is the same
whichever other cells the workload lists); the hit cells start with the warm prompt's first `shared_tokens`. The
reference captures every cell alone and cold (the prompt set's default capture)."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

from harness.config.cache_unit import expected_hit
from harness.config.errors import HarnessError
from harness.config.workloads import ConcurrentPrefillsWorkload
from harness.measure.generation import Generation, Sampling
from harness.measure.prompts import TokenSpace
from harness.records.started_run import StartedRun
from harness.refcheck.prompt_sets.registry import PromptSet, candidate_workload
from harness.refcheck.prompts.check_prompts import CheckPrompt
from harness.refcheck.prompts.coverage_cells import CoverageCell
from harness.refcheck.send.batches import abort_reason
from harness.refcheck.send.coverage_send import HITS, CoverageServer, FamilyOutcome, delta

PREFILLS = "concurrent_prefills"


@dataclass(frozen=True)
class PrefillPrompts:
    warm: CoverageCell | None  # the prompt the hit cells share a prefix with (none without hit cells)
    cells: list[CoverageCell]  # cold cells by length, then the hit cells
    shared_tokens: int

    def all(self) -> list[CheckPrompt]:
        return [c.prompt() for c in ([self.warm] if self.warm else []) + self.cells]

    def fingerprint(self) -> str:
        """Hash of every id and prompt: part of the reference key."""
        h = hashlib.sha256()
        for p in self.all():
            h.update(json.dumps([p.id, p.tokens]).encode())
        return h.hexdigest()[:16]


def random_tokens(space: TokenSpace, seed: int, cell: str, n: int) -> list[int]:
    return random.Random(f"{PREFILLS}-{seed}-{cell}").choices(space.allowed(), k=n)


def build_prefill_prompts(w: ConcurrentPrefillsWorkload, space: TokenSpace) -> PrefillPrompts:
    """The same workload and vocabulary give the same prompts."""
    def cell(cid: str, tokens: list[int]) -> CoverageCell:
        return CoverageCell(cid, PREFILLS, tokens, w.output_tokens)

    cells = [cell(f"{PREFILLS}-L{n}", random_tokens(space, w.seed, f"L{n}", n)) for n in sorted(w.lengths)]
    warm = cell(f"{PREFILLS}-warm", random_tokens(space, w.seed, "warm", w.warm_tokens)) if w.hit_lengths else None
    for n in sorted(w.hit_lengths):
        fresh = random_tokens(space, w.seed, f"hit{n}", n - w.shared_tokens)
        cells.append(cell(f"{PREFILLS}-hit{n}", warm.tokens[:w.shared_tokens] + fresh))
    return PrefillPrompts(warm, cells, w.shared_tokens)


def arrival(cells: list[CoverageCell], order: str) -> list[CoverageCell]:
    """The burst's arrival order: longest_first, shortest_first, or interleaved (longest, shortest, next longest,
    next shortest, ...)."""
    by_length = sorted(cells, key=lambda c: (len(c.tokens), c.id))
    if order == "shortest_first":
        return by_length
    if order == "longest_first":
        return by_length[::-1]
    out, lo, hi = [], 0, len(by_length) - 1
    while lo <= hi:
        out.append(by_length[hi])
        if lo < hi:
            out.append(by_length[lo])
        lo, hi = lo + 1, hi - 1
    return out


def expected_hits(prompts: PrefillPrompts, unit: int) -> int:
    """Prefix-cache hits one burst must show: each hit cell's shared part in whole cache units."""
    return sum(expected_hit(len(c.tokens), prompts.shared_tokens, unit) for c in prompts.cells
               if c.id.startswith(f"{PREFILLS}-hit"))


def send_bursts(server: CoverageServer, prompts: PrefillPrompts, reference: dict[str, Generation],
                orders: list[str]) -> FamilyOutcome:
    """Per order, under a salt of its own: the warm prompt alone (compared, and cached for the hit cells), then every
    cell at once; each output against the reference's. With prefix caching on, each burst's hits must cover the hit
    cells' shared parts (a partial hit the server did not make was not exercised)."""
    fam = FamilyOutcome()
    hits, lengths = 0.0, sorted(len(c.tokens) for c in prompts.cells)
    try:
        caching, unit = server.caching_on(), server.pool().block or 1
        for order in orders:
            if prompts.warm:
                out = server.send([prompts.warm], order)[0]
                server.compare(fam, f"{prompts.warm.id}-{order}", len(prompts.warm.tokens), out,
                               reference[prompts.warm.id], f"warm prompt alone ({order})")
            burst = arrival(prompts.cells, order)
            before = server.counter(HITS)
            outs = server.send(burst, order)
            got = delta(before, server.counter(HITS))
            for c, out in zip(burst, outs, strict=True):
                server.compare(fam, f"{c.id}-{order}", len(c.tokens), out, reference[c.id],
                               f"{c.group}, {len(burst)} prefills at once ({order})", len(burst))
            want = expected_hits(prompts, unit)
            if caching and want and got is None:
                fam.unproven.append(f"{order}: /metrics has no {HITS} counter; the partial hits cannot be proven")
            elif caching and got is not None and got < want:
                fam.unproven.append(f"{order}: prefix-cache hits {got:g} tokens < {want} expected (the hit cells' "
                                    "shared part was not reused)")
            hits += got or 0
    except HarnessError as exc:
        fam.compared.aborted = abort_reason(PREFILLS, exc, server.live)
        return fam
    fam.cached_tokens = hits if caching else None
    fam.notes.append(f"{len(prompts.cells)} prefills of {lengths[0]:,}-{lengths[-1]:,} tokens at once, "
                     f"orders {', '.join(orders)}")
    if not caching and prompts.warm:
        fam.notes.append("prefix caching off: the hit cells recomputed their shared part (no partial hit)")
    return fam


def build(run: StartedRun, candidate: str) -> tuple[PrefillPrompts, Sampling]:
    w, _, space = candidate_workload(run, candidate, PREFILLS)
    return build_prefill_prompts(w, space), Sampling(w.output_tokens, w.top_logprobs)


PROMPT_SETS = (PromptSet(PREFILLS, PREFILLS, "concurrent_prefills_outputs", build),)
