"""Reserved needle tokens and their codes (pure, stdlib only).

The retrieval circuit (harness/tinymodel/circuit.py) copies only these tokens. Each needle has a two-digit code in
base DIGITS (one-hot per digit, two ones in all): two different needles share at most one digit, so a query matches
its own key with twice the score of any other needle's.
"""

from __future__ import annotations

import random

DIGITS = 16
N_NEEDLES = DIGITS * DIGITS  # 256
CODE_DIMS = 2 * DIGITS  # 32


def needle_name(i: int) -> str:
    return f"<needle_{i:03d}>"


def code_dims(i: int) -> tuple[int, int]:
    """The two code dimensions (of CODE_DIMS) set for needle number i."""
    return i // DIGITS, DIGITS + i % DIGITS


def needle_copy_prompt(rng: random.Random, filler: list[int], needles: list[int], length: int, span_len: int,
                       cue: int, span_at: int) -> tuple[list[int], list[int]]:
    """copytask.copy_prompt's shape with a span of distinct needle tokens in ordinary filler: a `length`-token
    prompt ending with the span's first `cue` tokens; returns (prompt, expected continuation)."""
    if not 0 < cue < span_len <= len(needles):
        raise ValueError(f"cue {cue} and span {span_len} need 0 < cue < span <= {len(needles)} needles")
    if span_at + span_len + cue > length:
        raise ValueError(f"a {length}-token prompt cannot hold the span at {span_at} and its cue")
    tokens = rng.choices(filler, k=length)
    span = rng.sample(needles, span_len)
    tokens[span_at:span_at + span_len] = span
    tokens[length - cue:] = span[:cue]
    return tokens, span[cue:]
