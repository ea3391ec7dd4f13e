"""Copy-from-far-back sequences (pure, stdlib only): the GPU tiny model is trained on them, and the GPU reference
checks' copy prompts are built from them, so attention over a long context is sharp and content-dependent.

A sequence is random tokens with one span placed early; the span recurs later and must be continued. Greedy
continuation of a cue then depends on KV written thousands of tokens earlier -- with DCP interleave 1, on KV that
sits on every DCP rank -- so a wrongly weighted or shifted cross-rank combine changes what the model copies.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class CopySequence:
    tokens: list[int]
    span_start: int  # where the span first appears
    repeat_start: int  # where it recurs
    span: list[int]


def copy_sequence(rng: random.Random, allowed: list[int], length: int, span_len: int,
                  span_at: int | None = None) -> CopySequence:
    """`length` tokens: random filler, the span at `span_at` (random in the first quarter when None) and again at
    the end (training: the whole repeat is there; the loss on it teaches copying)."""
    if length < 2 * span_len + 2:
        raise ValueError(f"length {length} too short for two {span_len}-token spans")
    tokens = rng.choices(allowed, k=length)
    span = rng.choices(allowed, k=span_len)
    a = span_at if span_at is not None else rng.randrange(0, max(1, length // 4 - span_len))
    b = length - span_len
    if a + span_len > b:
        raise ValueError(f"span at {a} overlaps its repeat at {b}")
    tokens[a:a + span_len] = span
    tokens[b:] = span
    return CopySequence(tokens, a, b, span)


def copy_prompt(rng: random.Random, allowed: list[int], length: int, span_len: int, cue: int,
                span_at: int) -> tuple[list[int], list[int]]:
    """A `length`-token prompt ending with the span's first `cue` tokens; returns (prompt, expected continuation)."""
    if not 0 < cue < span_len:
        raise ValueError(f"cue {cue} must be within the {span_len}-token span")
    if span_at + span_len + cue > length:
        raise ValueError(f"a {length}-token prompt cannot hold the span at {span_at} and its cue")
    tokens = rng.choices(allowed, k=length)
    span = rng.choices(allowed, k=span_len)
    tokens[span_at:span_at + span_len] = span
    tokens[length - cue:] = span[:cue]
    return tokens, span[cue:]


def copy_accuracy(predicted: list[int], expected: list[int]) -> float:
    """Fraction of expected tokens reproduced in place."""
    n = min(len(predicted), len(expected))
    return sum(p == e for p, e in zip(predicted[:n], expected[:n], strict=True)) / len(expected) if expected else 0.0
