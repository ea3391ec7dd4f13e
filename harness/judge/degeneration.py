"""Degenerate output (loops, repeated spans), judged against the reference arm's output for the same prompt (pure).

A garbled speculative or DCP arm tends to repeat itself: a short unit looping to the end, or a long span copied
twice. A tiny or weak model repeats too, so a candidate is never judged alone: it fails only when it is clearly more
repetitive than its reference on the same request. Works on any sequence of hashable units (token ids, words).

An output whose first divergence from the reference is a tie flip (the reference's own top-2 gap within tie_gap) is
not judged: after the flip the candidate continues another text, the model's own greedy continuation of a prefix
the reference could as well have chosen, and a tiny model loops on some of those (H200, gpu-mla, clean build:
graph_replay r4b8-7 flipped at a bf16 tie and looped, 45 of 64 units against the reference's 25). A real collapse
diverges where the reference was confident, and is still judged.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from harness.config.thresholds import DegenerationGates

UNIT = re.compile(r"\w+|[^\w\s]")


def text_units(text: str) -> list[str]:
    """Words and single punctuation marks: a loop without spaces (':::::') is as visible as one of words."""
    return UNIT.findall(text)


@dataclass(frozen=True)
class Repetition:
    """How repetitive one output is."""

    length: int
    distinct_2: float  # unique bigrams / bigrams (1.0: no bigram repeats)
    span: int  # longest unit run that occurs twice (overlap allowed), in units
    span_start: int  # where its second occurrence starts
    span_shift: int  # distance between the two occurrences (a loop's period when the span runs into itself)
    loop_period: int  # shortest period p whose repetition covers the most units (0: none)
    loop_units: int  # units covered by that loop: p x repeats

    @property
    def span_fraction(self) -> float:
        return self.span / self.length if self.length else 0.0

    @property
    def loop_fraction(self) -> float:
        return self.loop_units / self.length if self.length else 0.0


def distinct_n(units: Sequence[Hashable], n: int = 2) -> float:
    grams = [tuple(units[i:i + n]) for i in range(len(units) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def longest_run_per_shift(units: Sequence[Hashable]) -> dict[int, tuple[int, int]]:
    """shift d -> (longest run of i with units[i] == units[i + d], where that run starts in the second copy)."""
    n = len(units)
    out = {}
    for d in range(1, n):
        best, best_at, run = 0, 0, 0
        for i in range(n - d):
            run = run + 1 if units[i] == units[i + d] else 0
            if run > best:
                best, best_at = run, i + d - run + 1
        out[d] = (best, best_at)
    return out


def repetition(units: Sequence[Hashable], max_period: int = 16) -> Repetition:
    """Longest repeated span (any shift) and the strongest short loop (shift <= max_period) of one output."""
    runs = longest_run_per_shift(units)
    span, start, shift = 0, 0, 0
    for d, (run, at) in runs.items():
        if run > span:
            span, start, shift = run, at, d
    period, covered = 0, 0
    for d in range(1, min(max_period, len(units) - 1) + 1):
        run = runs[d][0]
        if run >= d and run + d > covered:  # the unit appears at least twice in a row
            period, covered = d, run + d
    return Repetition(len(units), distinct_n(units), span, start, shift, period, covered)


@dataclass(frozen=True)
class Degeneration:
    request: str
    candidate: Repetition
    reference: Repetition
    quote: str  # the candidate's repeated span, as the caller renders it (text, or token ids)
    why: str


def clearly_worse(cand: Repetition, ref: Repetition, limits: DegenerationGates) -> str | None:
    """Why the candidate is clearly more repetitive than the reference, or None."""
    if cand.span >= limits.min_span and cand.span_fraction - ref.span_fraction >= limits.span_fraction_margin:
        return (f"repeated span of {cand.span} of {cand.length} units (reference {ref.span} of {ref.length}; "
                f"margin {limits.span_fraction_margin:g} of the output)")
    if ref.distinct_2 - cand.distinct_2 >= limits.distinct_2_margin:
        return (f"distinct-2 {cand.distinct_2:.2f} vs reference {ref.distinct_2:.2f} (margin "
                f"{limits.distinct_2_margin:g})")
    return None


def judge_pair(request: str, cand: Sequence[Hashable], ref: Sequence[Hashable], limits: DegenerationGates,
               render=None) -> Degeneration | None:
    """A Degeneration when the candidate's output is clearly more repetitive than the reference's, else None.
    `render(units)` turns the repeated span into the quoted text (default: the units joined by spaces)."""
    c, r = repetition(cand, limits.max_period), repetition(ref, limits.max_period)
    why = clearly_worse(c, r, limits)
    if why is None:
        return None
    span = cand[c.span_start:c.span_start + c.span]  # the longest span covers any loop's run
    quote = (render or (lambda u: " ".join(map(str, u))))(span)
    return Degeneration(request, c, r, quote, why)


def degeneration_line(d: Degeneration, width: int = 160) -> str:
    quoted = d.quote if len(d.quote) <= width else d.quote[:width] + "..."
    return f"request {d.request}: more repetitive than the reference: {d.why}; repeated: {quoted!r}"


def mean_span_fraction(outputs: list[Sequence[Hashable]], max_period: int = 16) -> float | None:
    """How repetitive an arm's outputs are on average (longest repeated span / length): near 1 means trivially
    predictable text, where a draft that is always right is expected."""
    fractions = [repetition(u, max_period).span_fraction for u in outputs if u]
    return sum(fractions) / len(fractions) if fractions else None


def degeneration_fields(pairs: list[tuple[str, Sequence[Hashable], Sequence[Hashable]]], reference: str,
                        limits: DegenerationGates, render=None, tie_flipped: Mapping[str, str] | None = None) -> dict:
    """A DegenerationRecord's fields from (request, candidate units, reference units) per prompt. `tie_flipped`:
    request -> where it first diverged at a tie flip; those outputs are listed, not judged."""
    if not pairs:
        return {"reference": reference, "passed": False, "detail": "no data: no output to judge", "requests": 0,
                "status": "no_data"}
    exempt = tie_flipped or {}
    judged = [(req, c, r) for req, c, r in pairs if req not in exempt]
    found = [d for req, c, r in judged if (d := judge_pair(req, c, r, limits, render))]
    detail = (f"{len(found)}/{len(judged)} output(s) clearly more repetitive than {reference}'s" if found
              else f"no output clearly more repetitive than {reference}'s ({len(judged)} compared)")
    not_judged = [f"request {req}: {exempt[req]}" for req, _, _ in pairs if req in exempt]
    if not_judged:
        detail += (f"; {len(not_judged)} not judged: diverged first at a tie flip (another greedy text follows, "
                   "not a fault)")
    return {"reference": reference, "passed": not found, "detail": detail, "requests": len(pairs),
            "flagged": [degeneration_line(d) for d in found], "tie_flipped": not_judged}
