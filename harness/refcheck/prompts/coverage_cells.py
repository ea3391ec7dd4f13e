"""The output_coverage suite's cells (pure): prompts placed where the work goes beyond the long_context grid's copy
prompts, each compared with the reference's output of the same prompt sent alone.

- long_generation: outputs compared deep into a generation (256 tokens on CPU; the grid compares 24);
- short_prompts: 1 to (DCP size x interleave + 1) tokens and a few lengths up to 129 (a DCP rank may hold an empty
  KV shard, vLLM #38416);
- chunk_boundaries: one token either side of every multiple of the candidate's chunked-prefill budget up to
  max_model_len (a context split over several chunks, vLLM #28476);
- kv_pressure: a burst larger than the KV pool, so requests are preempted and recomputed (sglang #36886);
- recycled_blocks: prompts sent again after the pool was filled with other prompts, so they run on reused blocks
  holding stale KV (vLLM #48003);
- multi_turn: a session turn by turn with a fixed transcript, each turn reusing the cached earlier ones (#41623).

Prompts are random tokens of the arm's usable vocabulary, one generator per cell id, so a cell's prompt is the same
whichever other cells a workload lists. The prompt set has the reference store's interface (`all()`,
`fingerprint()`); the session's turns enter the store as their user turns (the prompt a turn is sent with holds the
reference's earlier outputs, known only once they are captured)."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass

from harness.config.arms import Arm
from harness.config.workloads import ChunkBoundarySpec, ChunkBudget, OutputCoverageWorkload, chunk_budget
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompts.check_prompts import CheckPrompt

LONG_GENERATION, SHORT, CHUNK, PRESSURE, RECYCLED, MULTI_TURN = (
    "long_generation", "short_prompts", "chunk_boundaries", "kv_pressure", "recycled_blocks", "multi_turn")
FAMILIES = (LONG_GENERATION, SHORT, CHUNK, PRESSURE, RECYCLED, MULTI_TURN)  # each one reference check


@dataclass(frozen=True)
class CoverageCell:
    id: str  # "long_generation-L1024": stable across runs (the reference store keys outputs by it)
    family: str
    tokens: list[int]
    max_tokens: int

    @property
    def group(self) -> str:
        return f"{self.family}, {len(self.tokens):,} tokens"

    def prompt(self) -> CheckPrompt:
        return CheckPrompt(self.id, self.tokens, self.group)


@dataclass(frozen=True)
class CoveragePrompts:
    cells: list[CoverageCell]
    turns: list[list[int]]  # the session's user turns, in order
    turn_tokens: int  # each turn's generation
    budget: ChunkBudget

    def family(self, name: str) -> list[CoverageCell]:
        return [c for c in self.cells if c.family == name]

    def all(self) -> list[CheckPrompt]:
        """Every prompt whose reference output is stored: the cells, and each turn under its user turn's tokens."""
        return [c.prompt() for c in self.cells] + [CheckPrompt(turn_id(k), t, f"{MULTI_TURN}, turn {k}")
                                                   for k, t in enumerate(self.turns, 1)]

    def fingerprint(self) -> str:
        """Hash of every cell (id, prompt, output length) and the session: part of the reference key."""
        h = hashlib.sha256()
        for c in self.cells:
            h.update(json.dumps([c.id, c.tokens, c.max_tokens]).encode())
        h.update(json.dumps([self.turns, self.turn_tokens]).encode())
        return h.hexdigest()[:16]

    @property
    def max_tokens(self) -> int:
        return max([c.max_tokens for c in self.cells] + [self.turn_tokens])


def turn_id(k: int) -> str:
    return f"{MULTI_TURN}-turn{k}"


def turn_prompt(turns: list[list[int]], outputs: dict[str, list[int]], k: int) -> list[int]:
    """Turn k's prompt (1-based): each earlier user turn followed by the reference's output for it, then user turn k.
    KeyError where an earlier turn's output is missing."""
    tokens: list[int] = []
    for i in range(1, k):
        tokens += turns[i - 1] + outputs[turn_id(i)]
    return tokens + turns[k - 1]


def short_lengths(lengths: list[int], dcp: int, interleave: int) -> list[int]:
    """The workload's lengths and every length from 1 to dcp x interleave + 1: each DCP rank's first shard empty,
    partial and full."""
    return sorted(set(lengths) | set(range(1, dcp * interleave + 2)))


def chunk_lengths(spec: ChunkBoundarySpec, budget: int, max_model_len: int, output_tokens: int) -> list[int]:
    """Prompt lengths `offsets` away from each multiple of the budget whose cell fits max_model_len; past
    max_multiples the longest multiples are kept (the deepest splits)."""
    room = max_model_len - output_tokens
    multiples = [k * budget for k in range(1, room // budget + 1)]
    multiples = multiples[-spec.max_multiples:]
    return sorted({m + d for m in multiples for d in spec.offsets if 1 <= m + d <= room})


def random_tokens(space: TokenSpace, seed: int, cell: str, n: int) -> list[int]:
    return random.Random(f"output-coverage-{seed}-{cell}").choices(space.allowed(), k=n)


def build_coverage_prompts(w: OutputCoverageWorkload, space: TokenSpace, arm: Arm) -> CoveragePrompts:
    """Every family's cells for candidate `arm` (its DCP size, interleave, chunk budget and max_model_len), by family
    then length; the same workload, vocabulary and arm give the same prompts."""
    def cell(family: str, name: str, n: int, out: int) -> CoverageCell:
        cid = f"{family}-{name}"
        return CoverageCell(cid, family, random_tokens(space, w.seed, cid, n), out)

    budget = chunk_budget(arm, w)
    dcp, interleave = arm.parallelism.dcp, arm.parallelism.cp_kv_cache_interleave_size
    g = w.long_generation
    cells = [cell(LONG_GENERATION, f"L{n}", n, g.output_tokens) for n in sorted(g.lengths)]
    cells += [cell(SHORT, f"L{n}", n, w.output_tokens) for n in short_lengths(w.short_prompts.lengths, dcp, interleave)]
    cells += [cell(CHUNK, f"L{n}", n, w.output_tokens)
              for n in chunk_lengths(w.chunk_boundaries, budget.tokens, arm.model.max_model_len, w.output_tokens)]
    if p := w.pressure:
        cells += [cell(PRESSURE, f"{i}", p.prompt_tokens, p.output_tokens) for i in range(1, p.requests + 1)]
    if r := w.recycled:
        cells += [cell(RECYCLED, f"{i}", r.prompt_tokens, w.output_tokens) for i in range(1, r.prompts + 1)]
    m = w.multi_turn
    turns = [random_tokens(space, w.seed, f"{MULTI_TURN}-user{k}", m.user_tokens) for k in range(1, m.turns + 1)]
    return CoveragePrompts(cells, turns, m.output_tokens, budget)


def fill_plan(pool_tokens: int, factor: float, prompt_tokens: int) -> list[int]:
    """Prompt lengths whose prefill writes `factor` x the pool's tokens: whole prompts of `prompt_tokens` and the
    rest."""
    total = int(pool_tokens * factor) + 1
    whole, rest = divmod(total, prompt_tokens)
    return [prompt_tokens] * whole + ([rest] if rest else [])


def pressure_shortfall(requests: int, tokens_each: int, pool_tokens: int) -> str | None:
    """Why a burst cannot press the pool: its requests' full lengths together fit in it (no preemption can happen)."""
    need = requests * tokens_each
    if need <= pool_tokens:
        return (f"the burst ({requests} requests x {tokens_each:,} tokens = {need:,}) fits the KV pool of "
                f"{pool_tokens:,} tokens: no request can be preempted; cap the arm's KV (server.kv_cache_blocks) or "
                "raise pressure.requests")
    return None
