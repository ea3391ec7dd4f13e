"""Another batch composition and arrival order for the reference checks' prompts (pure), reproducible from a seed.

A check that always sends the same prompts in the same batches measures one composition: a fault (or noise) that
depends on which requests share a step is seen or missed by luck of that order. `harness calibrate` runs each repeat
under another seed, so the clean spread it measures covers compositions, and `qualify --order-seed N` replays one.
Seed 0 is the canonical order the prompts were built in. Prompts keep their ids and groups (what pairs them with the
reference and the floor); only who is sent with whom, and in which order, changes.
"""

from __future__ import annotations

import random

from harness.refcheck.prompts.check_prompts import CheckPrompt


def reorder_rounds(rounds: list[list[CheckPrompt]], seed: int) -> list[list[CheckPrompt]]:
    """The same round sizes (the captured graph sizes and padding boundaries the rounds walk), filled with the prompts
    shuffled across rounds, the rounds themselves in shuffled order; seed 0: unchanged."""
    if not seed:
        return rounds
    rng = random.Random(f"order-{seed}")
    prompts = [p for r in rounds for p in r]
    rng.shuffle(prompts)
    sizes = [len(r) for r in rounds]
    rng.shuffle(sizes)
    out, at = [], 0
    for size in sizes:
        out.append(prompts[at:at + size])
        at += size
    return out


def reorder(prompts: list[CheckPrompt], seed: int) -> list[CheckPrompt]:
    """One batch (or a one-at-a-time sequence) in another arrival order; seed 0: unchanged."""
    if not seed:
        return prompts
    out = list(prompts)
    random.Random(f"order-{seed}").shuffle(out)
    return out
