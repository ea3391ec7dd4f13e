"""The long_context suite's prompt grid (pure): per (length, depth) one copy prompt whose greedy continuation must be
read from KV written at that depth.

A prompt is ordinary filler tokens, a span of distinct needle tokens starting at `depth` of the room before the cue,
and the span's first `cue_tokens` again at the end; the expected continuation is the rest of the span. Filler never
uses a needle token, so the cue occurs once before the end and the copy is unambiguous. Needle tokens come from the
workload (needle_token_ids), else the model dir's tiny_model.json `needle_tokens` (the tiny model is trained to copy
them), else the ordinary token space (a real model copies a random span too).

The grid has the reference store's interface (`all()`, `fingerprint()`): the reference arm's cold outputs are
captured once and reused across runs like the reference checks'.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from harness.config.errors import ConfigError
from harness.config.workloads import LongContextWorkload
from harness.measure.prompts import TokenSpace

TINY_MODEL_FILE = "tiny_model.json"
PARTIAL_SUFFIX_TOKENS = 64  # the partial-hit warm-up's own tokens after the shared part


@dataclass(frozen=True)
class ContextCell:
    id: str  # "L4000-d0.05": stable across runs (the reference store keys outputs by it)
    tokens: list[int]
    group: str
    length: int
    depth: float
    span_at: int
    expected: list[int]  # the span after the cue: what a model that retrieves continues with


@dataclass(frozen=True)
class LongContextPrompts:
    cells: list[ContextCell]  # by length, then depth
    needle_source: str

    def all(self) -> list[ContextCell]:
        return list(self.cells)

    def fingerprint(self) -> str:
        """Hash of every id, prompt and expected continuation: part of the reference key."""
        h = hashlib.sha256()
        for c in self.cells:
            h.update(json.dumps([c.id, c.tokens, c.expected]).encode())
        return h.hexdigest()[:16]


def cell_id(length: int, depth: float) -> str:
    return f"L{length}-d{depth:g}"


def span_start(length: int, depth: float, span: int, cue: int) -> int:
    """The span's first position: `depth` of the room before the cue (0: the start, 1: right before the cue)."""
    return round(depth * (length - cue - span))


def read_needle_tokens(model_dir: Path | None) -> list[int] | None:
    """tiny_model.json's `needle_tokens` in a local model dir; None when the file or key is absent."""
    path = model_dir / TINY_MODEL_FILE if model_dir is not None else None
    if path is None or not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is unreadable ({exc}); regenerate the model (`make model`)") from None
    tokens = doc.get("needle_tokens") if isinstance(doc, dict) else None
    if tokens is None:
        return None
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise ConfigError(f"{path}: needle_tokens must be a list of token ids; regenerate the model (`make model`)")
    return tokens


def needle_pool(workload: LongContextWorkload, space: TokenSpace, published: list[int] | None) -> tuple[list[int], str]:
    """(the ids a span is drawn from, where they came from); ConfigError naming the field when they are unusable."""
    if workload.needle_token_ids is not None:
        ids, source, field = sorted(set(workload.needle_token_ids)), "workload needle_token_ids", "needle_token_ids"
    elif published is not None:
        ids, source, field = sorted(set(published)), f"{TINY_MODEL_FILE} needle_tokens", "needle_tokens"
    else:
        return space.allowed(), "the ordinary token space"
    bad = [t for t in ids if t >= space.vocab_size or t in space.excluded]
    if bad:
        raise ConfigError(f"workload {workload.name!r}: {source} holds {len(bad)} id(s) outside the usable vocabulary "
                          f"(e.g. {bad[:5]}; vocab {space.vocab_size}, special ids excluded): fix {field}")
    if len(ids) < workload.span_tokens:
        raise ConfigError(f"workload {workload.name!r}: {source} has {len(ids)} distinct ids, the span needs "
                          f"{workload.span_tokens}: fix {field} or lower span_tokens")
    if len(ids) >= len(space.allowed()):
        raise ConfigError(f"workload {workload.name!r}: {source} leaves no filler token: fix {field}")
    return ids, f"{source} ({len(ids)} ids)"


def build_long_context_prompts(workload: LongContextWorkload, space: TokenSpace,
                               published: list[int] | None = None) -> LongContextPrompts:
    """The grid, by length then depth; the same workload, vocabulary and needles give the same prompts."""
    needles, source = needle_pool(workload, space, published)
    own_pool = source == "the ordinary token space"
    filler_pool = space.allowed() if own_pool else sorted(set(space.allowed()) - set(needles))
    cells = []
    for length in sorted(workload.lengths):
        for depth in workload.depths:
            rng = random.Random(f"long-context-{workload.seed}-{length}-{depth!r}")  # one cell's change moves no other
            span = rng.sample(needles, workload.span_tokens)
            taken = set(span)
            pool = [t for t in filler_pool if t not in taken] if own_pool else filler_pool
            tokens = rng.choices(pool, k=length)
            at = span_start(length, depth, workload.span_tokens, workload.cue_tokens)
            tokens[at:at + workload.span_tokens] = span
            tokens[length - workload.cue_tokens:] = span[:workload.cue_tokens]
            cells.append(ContextCell(cell_id(length, depth), tokens, f"length {length}, depth {depth:g}", length,
                                     depth, at, span[workload.cue_tokens:]))
    return LongContextPrompts(cells, source)


def sweep_lengths(workload: LongContextWorkload, seed: int) -> tuple[list[int], list[int]]:
    """(dense, jittered) lengths of the sweep, none a grid length: `sweep_lengths` evenly spaced from the shortest to
    the longest grid length, and `jitter_per_gap` drawn uniformly inside each gap between two grid lengths from
    `seed` (the same seed, the same lengths)."""
    grid = sorted(workload.lengths)
    lo, hi = grid[0], grid[-1]
    n = workload.sweep_lengths
    dense = sorted({round(lo + (hi - lo) * (i + 1) / (n + 1)) for i in range(n)} - set(grid)) if n else []
    rng = random.Random(f"long-context-sweep-{workload.seed}-{seed}")
    jitter = set()
    for a, b in zip(grid, grid[1:], strict=False):
        if b - a > 1:
            jitter |= {rng.randint(a + 1, b - 1) for _ in range(workload.jitter_per_gap)}
    return dense, sorted(jitter - set(grid) - set(dense))


def build_sweep_prompts(workload: LongContextWorkload, space: TokenSpace, seed: int,
                        published: list[int] | None = None) -> LongContextPrompts:
    """The sweep's cells: the grid's prompt recipe at the sweep lengths and the one sweep depth (ids L<n>-d<depth>,
    built by the same per-cell generator, so a length's prompt is the same whichever run draws it)."""
    dense, jitter = sweep_lengths(workload, seed)
    lengths = sorted(set(dense) | set(jitter))
    if not lengths:
        return LongContextPrompts([], "no sweep")
    sweep = workload.model_copy(update={"lengths": lengths, "depths": [workload.sweep_depth], "modes": ["cold"]})
    return build_long_context_prompts(sweep, space, published)


def shared_tokens(workload: LongContextWorkload, length: int, unit: int) -> int:
    """Tokens of a `length`-token cell the partial-hit warm-up shares: whole prefix-cache units (cache_unit's:
    block_size x dcp); ConfigError when none fits or a stated count is not unit-aligned."""
    if isinstance(workload.partial_shared, int):
        if workload.partial_shared % unit:
            raise ConfigError(f"workload {workload.name!r}: partial_shared {workload.partial_shared} is not a "
                              f"multiple of the arm's prefix-cache unit {unit} (block_size x dcp): set it to whole "
                              "units or a fraction")
        return workload.partial_shared
    tokens = int(workload.partial_shared * length) // unit * unit
    if tokens <= 0:
        raise ConfigError(f"workload {workload.name!r}: partial_shared {workload.partial_shared:g} of {length} tokens "
                          f"is less than one prefix-cache unit ({unit}, block_size x dcp): raise it or drop that "
                          "length")
    return tokens


def partial_warmup(cell: ContextCell, prefix: int, seed: int = 0) -> list[int]:
    """The partial-hit warm-up: the cell's first `prefix` tokens + its own suffix (first token differs from the
    cell's next one, so the hit is exactly the shared prefix); at most as long as the cell."""
    rng = random.Random(f"partial-{seed}-{cell.id}")
    n = max(1, min(PARTIAL_SUFFIX_TOKENS, cell.length - prefix))
    pool = sorted(set(cell.tokens))
    first = rng.choice([t for t in pool if t != cell.tokens[prefix]])
    return cell.tokens[:prefix] + [first, *rng.choices(pool, k=n - 1)]
