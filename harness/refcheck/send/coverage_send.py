"""The output_coverage cells on a live server: the reference's capture (every cell alone, the session turn by turn on
its own outputs) and the candidate's families, each leaving its comparisons, the failures beyond them (a proof that
could not be given) and what its server's counters proved. Every comparison is appended to the check's comparisons
file as it is made; a server death or a failed request stops the family with the reason (BatchComparisons.aborted)
and keeps every comparison made before it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.cache_unit import cache_unit, expected_hit
from harness.config.errors import HarnessError
from harness.config.scheduling import proof as scheduling_proof
from harness.config.workloads import RecycledSpec
from harness.measure.generation import Generation, Sampling
from harness.measure.metrics import cache_config, counter_total, fetch_metrics, label_int, prefix_caching_on
from harness.records.schema import CoveredRequest
from harness.refcheck.judging.compare import compare_outputs, compared_to
from harness.refcheck.judging.comparisons import BatchComparisons
from harness.refcheck.prompts.check_prompts import CheckPrompt
from harness.refcheck.prompts.coverage_cells import (
    CoverageCell,
    CoveragePrompts,
    fill_plan,
    pressure_shortfall,
    turn_id,
    turn_prompt,
)
from harness.refcheck.send.batches import abort_reason, send

HITS = "vllm:prefix_cache_hits_total"
PREEMPTIONS = "vllm:num_preemptions_total"
DRAFTS = "vllm:spec_decode_num_drafts_total"


def capture_coverage(live, prompts: CoveragePrompts, top_logprobs: int) -> dict[str, Generation]:
    """The reference's outputs: every cell alone under its own cache salt, then the session turn by turn, each turn's
    prompt holding the reference's own earlier outputs (computed from scratch: a salt per turn)."""
    out = {c.id: send(live, [c.prompt()], Sampling(c.max_tokens, top_logprobs), cache_salt=f"reference-{c.id}")[0]
           for c in prompts.cells}
    turn = Sampling(prompts.turn_tokens, top_logprobs)
    for k in range(1, len(prompts.turns) + 1):
        tokens = turn_prompt(prompts.turns, {i: g.token_ids for i, g in out.items()}, k)
        out[turn_id(k)] = send(live, [CheckPrompt(turn_id(k), tokens, "")], turn,
                               cache_salt=f"reference-{turn_id(k)}")[0]
    return out


@dataclass
class FamilyOutcome:
    """What one family left: its comparisons (compared), what it could not prove (unproven: each line fails the check),
    its counters' proofs, and notes on what it covered."""

    compared: BatchComparisons = field(default_factory=BatchComparisons)
    unproven: list[str] = field(default_factory=list)
    cached_tokens: float | None = None  # prefix-cache hits over the part that proves reuse (session, recycled)
    preemptions: float | None = None  # vllm:num_preemptions delta over the pressure burst
    notes: list[str] = field(default_factory=list)  # what the family covered, for the record's detail
    covered: list[CoveredRequest] = field(default_factory=list)  # per comparison: prompt, generated, batch


def delta(before: float | None, after: float | None) -> float | None:
    return after - before if before is not None and after is not None else None


@dataclass(frozen=True)
class Pool:
    """The candidate's KV pool as its scheduler counts it: tokens in all, and the tokens of one cache block (the
    per-rank block_size x the DCP size: under DCP a block's tokens are spread over the ranks)."""

    tokens: int | None
    block: int | None


class CoverageServer:
    """The I/O of one candidate's cells: requests, /metrics counters, the comparisons file."""

    def __init__(self, live, top_logprobs: int, salt: str, sink: Path):
        self.live, self.top, self.salt, self.sink = live, top_logprobs, salt, sink

    def metrics(self) -> str:
        return fetch_metrics(self.live.info.base_url)

    def counter(self, name: str) -> float | None:
        return counter_total(self.metrics(), name)

    def pool(self) -> Pool:
        """From vllm:cache_config_info; None where the server does not say."""
        info = cache_config(self.metrics())
        blocks, size = label_int(info, "num_gpu_blocks"), label_int(info, "block_size")
        par = self.live.arm.parallelism
        block = cache_unit(size, par.dcp, par.pcp) if size else None
        return Pool(blocks * block if blocks and block else None, block)

    def caching_on(self) -> bool:
        info = cache_config(self.metrics())
        return prefix_caching_on(self.live.arm.server.enable_prefix_caching, info)

    def scheduling(self) -> tuple[str, str | None]:
        """The scheduling the server ran under and why it is not proven (harness/config/scheduling.py proof)."""
        return scheduling_proof(self.live.arm, self.live.server.log_text())

    def speculative(self) -> bool:
        return self.live.arm.speculative is not None

    def send(self, cells: list[CoverageCell], salt: str) -> list[Generation]:
        """The cells in flight at once (one cell: alone), each generating its own max_tokens (one per call)."""
        sampling = Sampling(cells[0].max_tokens, self.top)
        return send(self.live, [c.prompt() for c in cells], sampling, cache_salt=f"{self.salt}-{salt}")

    def compare(self, fam: FamilyOutcome, request: str, prompt_tokens: int, out: Generation, ref: Generation,
                group: str, batch: int = 1) -> None:
        c = compare_outputs(request, prompt_tokens, out, ref, group)
        fam.compared.comparisons.append(c)
        fam.covered.append(CoveredRequest(prompt_tokens=prompt_tokens, generated=compared_to(c) - prompt_tokens,
                                          batch=batch))
        fam.compared.outputs[request] = out.token_ids
        with self.sink.open("a") as f:
            f.write(c.model_dump_json() + "\n")


NO_POOL = "no data: /metrics has no vllm:cache_config_info num_gpu_blocks; the KV pool cannot be sized"


def fitting_batches(cells: list[CoverageCell], pool_tokens: int | None) -> list[list[CoverageCell]]:
    """The cells in order, cut into batches whose full lengths fit the pool together (all of them where the pool is
    unknown or holds them): a batch meant to mix prefill chunks with decodes must not also preempt."""
    batches: list[list[CoverageCell]] = [[]]
    used = 0
    for c in cells:
        need = len(c.tokens) + c.max_tokens
        if batches[-1] and pool_tokens is not None and used + need > pool_tokens:
            batches.append([])
            used = 0
        batches[-1].append(c)
        used += need
    return [b for b in batches if b]


def alone_then_together(server: CoverageServer, cells: list[CoverageCell], reference: dict[str, Generation],
                        label: str, together: bool = True) -> FamilyOutcome:
    """Each cell alone under its own salt (nothing cached), then (together) the cells at once under one salt, in as
    few batches as fit the KV pool: one output per cell and mode against the reference's."""
    fam = FamilyOutcome()
    try:
        for c in cells:
            out = server.send([c], f"{label}-{c.id}")[0]
            server.compare(fam, f"{c.id}-alone", len(c.tokens), out, reference[c.id], f"{c.group}, alone")
        batches = fitting_batches(cells, server.pool().tokens) if together and len(cells) > 1 else []
        for i, batch in enumerate(batches):
            for c, out in zip(batch, server.send(batch, f"{label}-together-{i}"), strict=True):
                server.compare(fam, f"{c.id}-together", len(c.tokens), out, reference[c.id],
                               f"{c.group}, {len(batch)} at once", len(batch))
    except HarnessError as exc:
        fam.compared.aborted = abort_reason(label, exc, server.live)
    return fam


def kv_pressure(server: CoverageServer, cells: list[CoverageCell], reference: dict[str, Generation]) -> FamilyOutcome:
    """The cells all at once, more than the KV pool holds: the server must preempt (its own counter says so) and
    every output, recomputed after preemption or not, must equal the reference's. No preemption: no data. An arm
    that asks for async scheduling must have its server's word that it ran (harness/config/scheduling.py), and a
    drafting arm the drafts counter's rise, else "not exercised".

    Each prompt is sent alone first (one output token, the burst's salt), so the burst's prefills are prefix hits and
    every request decodes from the same step: the one preempted (vLLM preempts the newest) has generated tokens for
    its recompute to restore. Sent cold, chunked prefill admits the prompts one by one and the newest request is
    still prefilling when the pool runs out: its recompute would exercise no generated token."""
    fam = FamilyOutcome()
    each = len(cells[0].tokens) + cells[0].max_tokens
    try:
        pool, caching = server.pool(), server.caching_on()
        for c in cells:
            server.send([CoverageCell(c.id, c.family, c.tokens, 1)], "pressure")
        before, drafts = server.counter(PREEMPTIONS), server.counter(DRAFTS) if server.speculative() else None
        outs = server.send(cells, "pressure")
    except HarnessError as exc:
        fam.compared.aborted = abort_reason("kv_pressure", exc, server.live)
        return fam
    for c, out in zip(cells, outs, strict=True):
        server.compare(fam, f"{c.id}-burst", len(c.tokens), out, reference[c.id], f"{c.group}, burst of {len(cells)}",
                       len(cells))
    try:
        fam.preemptions = delta(before, server.counter(PREEMPTIONS))
        drafted = delta(drafts, server.counter(DRAFTS)) if server.speculative() else None
    except HarnessError as exc:  # every output is compared already: what is missing is the proof
        fam.unproven.append(f"no data: /metrics unreadable after the burst ({exc}); preemption cannot be proven")
        return fam
    note, unproven = server.scheduling()
    fam.notes.append(note)
    fam.unproven += [unproven] if unproven else []
    if server.speculative() and not drafted:
        fam.unproven.append(f"not exercised: the arm drafts but {DRAFTS} did not rise over the burst "
                            f"({'no counter' if drafted is None else 'no draft'}): spec decode under preemption "
                            "is not proven")
    if pool.tokens is None:
        fam.unproven.append(NO_POOL)
    elif short := pressure_shortfall(len(cells), each, pool.tokens):
        fam.unproven.append(f"no data: {short}")
    if fam.preemptions is None:
        fam.unproven.append(f"no data: /metrics has no {PREEMPTIONS} counter; preemption cannot be proven")
    elif fam.preemptions <= 0:
        fam.unproven.append(f"no data: {PREEMPTIONS} did not rise over the burst of {len(cells)} x {each:,} tokens "
                            f"(KV pool {pool.tokens or 0:,} tokens): nothing was preempted, so recompute was not "
                            "exercised")
    fam.notes.append(f"{len(cells)} requests x {each:,} tokens at once on a KV pool of {pool.tokens or 0:,} tokens: "
                     f"{fam.preemptions or 0:g} preemption(s)")
    if not caching:
        fam.notes.append("prefix caching off: the prompts were not cached first, so the preempted request may have "
                         "had no generated token to restore")
    return fam


def recycled_blocks(server: CoverageServer, cells: list[CoverageCell], reference: dict[str, Generation],
                    spec: RecycledSpec, make_fill: Callable[[list[int]], list[list[int]]]) -> FamilyOutcome:
    """The cells under one salt (the control, before the fill), then fill prompts writing `spec.fill_factor` x the
    pool's tokens (each under its own salt, one output token; their lengths from the pool, their tokens from
    make_fill), then the cells again under the same salt -- their cached blocks were evicted, so they are recomputed
    into reused blocks -- and under a new salt: every output against the reference's. With prefix caching on, the
    second send must show fewer hits than a cached prompt would (the eviction happened)."""
    fam = FamilyOutcome()
    try:
        pool, caching = server.pool(), server.caching_on()
        if pool.tokens is None:
            fam.unproven.append(NO_POOL)
            return fam
        lengths = fill_plan(pool.tokens, spec.fill_factor, spec.fill_prompt_tokens)
        if sum(lengths) > spec.max_fill_tokens:
            fam.unproven.append(f"no data: filling the KV pool of {pool.tokens:,} tokens takes {sum(lengths):,} "
                                f"tokens, more than recycled.max_fill_tokens {spec.max_fill_tokens:,}: cap the arm's "
                                "KV (server.kv_cache_blocks) or raise max_fill_tokens")
            return fam
        for c, out in zip(cells, server.send(cells, "recycled"), strict=True):
            server.compare(fam, f"{c.id}-before-fill", len(c.tokens), out, reference[c.id], f"{c.group}, before fill",
                           len(cells))
        filler = [CoverageCell(f"fill-{i}", "fill", t, 1) for i, t in enumerate(make_fill(lengths))]
        for i in range(0, len(filler), 4):  # four at a time: the pool turns over without one huge batch
            server.send(filler[i:i + 4], f"fill-{i}")
        before = server.counter(HITS)
        for c, out in zip(cells, server.send(cells, "recycled"), strict=True):
            server.compare(fam, f"{c.id}-after-fill", len(c.tokens), out, reference[c.id], f"{c.group}, after fill",
                           len(cells))
        fam.cached_tokens = delta(before, server.counter(HITS)) if caching else None
        for c, out in zip(cells, server.send(cells, "recycled-new-salt"), strict=True):
            server.compare(fam, f"{c.id}-new-salt", len(c.tokens), out, reference[c.id], f"{c.group}, new salt",
                           len(cells))
    except HarnessError as exc:
        fam.compared.aborted = abort_reason("recycled_blocks", exc, server.live)
        return fam
    fam.notes.append(f"{sum(lengths):,} tokens of other prompts between the sends (KV pool {pool.tokens:,})")
    cacheable = sum(expected_hit(len(c.tokens), len(c.tokens), pool.block or 1) for c in cells)
    if not caching:
        fam.notes.append("prefix caching off: no eviction to prove; the sends after the fill ran on reused blocks")
    elif fam.cached_tokens is None:
        fam.unproven.append(f"no data: /metrics has no {HITS} counter; the eviction cannot be proven")
    elif fam.cached_tokens >= cacheable:
        fam.unproven.append(f"not recycled: the cells hit {fam.cached_tokens:g} cached tokens after the fill, all "
                            f"{cacheable} cacheable: their blocks were never evicted, or a stale cache entry served "
                            "them")
    return fam


def multi_turn(server: CoverageServer, prompts: CoveragePrompts, reference: dict[str, Generation]) -> FamilyOutcome:
    """The session turn by turn under one salt with the reference's transcript: each turn's output against the
    reference's; with prefix caching on, each turn after the first must hit the blocks of the turn before."""
    fam = FamilyOutcome()
    ref_tokens = {i: g.token_ids for i, g in reference.items()}
    sampling = Sampling(prompts.turn_tokens, server.top)
    previous, hits = 0, 0.0
    try:
        pool, caching = server.pool(), server.caching_on()
        for k in range(1, len(prompts.turns) + 1):
            tokens = turn_prompt(prompts.turns, ref_tokens, k)
            before = server.counter(HITS)
            out = send(server.live, [CheckPrompt(turn_id(k), tokens, "")], sampling,
                       cache_salt=f"{server.salt}-session")[0]
            hit = delta(before, server.counter(HITS))
            server.compare(fam, turn_id(k), len(tokens), out, reference[turn_id(k)],
                           f"multi_turn, turn {k} ({len(tokens):,} tokens)")
            want = expected_hit(len(tokens), previous, pool.block or 1) if k > 1 else 0
            if caching and hit is None:
                fam.unproven.append(f"turn {k}: /metrics has no {HITS} counter; the reuse cannot be proven")
            elif caching and hit < want:
                fam.unproven.append(f"turn {k}: prefix-cache hits {hit:g} tokens < {want} expected (the earlier "
                                    "turns were not reused)")
            hits += hit or 0
            previous = len(tokens)
    except HarnessError as exc:
        fam.compared.aborted = abort_reason(f"multi_turn turn {len(fam.compared.comparisons) + 1}", exc, server.live)
        return fam
    fam.cached_tokens = hits if caching else None
    if not caching:
        fam.notes.append("prefix caching off: each turn recomputed its whole prompt (no reuse to prove)")
    return fam
