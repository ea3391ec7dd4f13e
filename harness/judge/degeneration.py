"""Degenerate output (loops, repeated spans), judged against the reference arm's output for the same prompt (pure).

A tiny model repeats too, so a candidate fails only when clearly more repetitive than its reference on the same
request. After a tie flip a clean output may loop: such outputs are judged against the clean runs' largest move after
a flip, their share is capped (Fisher exact test), and an output set that flipped entirely is never a PASS
(docs/gates.md, "Degeneration a tie flip cannot hide").
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

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


@dataclass(frozen=True)
class CleanFlips:
    """What clean runs measured of tie flips: how often outputs flipped, and how much more repetitive than the
    reference an output became after its flip (the largest such move)."""

    flips: int  # clean outputs that diverged (each within the tie gap the clean runs derived)
    outputs: int  # clean outputs measured
    span_fraction_delta: float  # largest candidate-minus-reference span fraction of a diverged clean output
    distinct_2_delta: float  # largest reference-minus-candidate distinct-2 of one
    rate_calibrated: bool  # False: gates.yaml's measured counts
    deltas_calibrated: bool  # False: gates.yaml's measured deltas

    @property
    def rate(self) -> float:
        return self.flips / self.outputs


def clean_flips(limits: DegenerationGates, spread: Mapping | None = None) -> CleanFlips:
    """From a calibration's spread where it measured them, else gates.yaml's measured values; every clean divergence
    counts as a tie flip (the calibrated tie gap covers each)."""
    hand = CleanFlips(limits.clean_tie_flips, limits.clean_outputs, limits.clean_span_fraction_delta,
                      limits.clean_distinct_2_delta, False, False)
    if not spread:
        return hand
    # one repeat's worth (mean count, rounded up): the K repeats flip the same requests, no K x n independent
    # outputs; pooled, the cap is too tight (docs/gates.md, "Degeneration a tie flip cannot hide")
    repeats, outputs = int(spread.get("repeats") or 0), int(spread.get("requests") or 0)
    total = spread.get("tie_flips", spread.get("divergences"))
    flips = None if total is None or repeats <= 0 else -(-int(total) // repeats)
    span, distinct = spread.get("span_fraction_delta_max"), spread.get("distinct_2_delta_max")
    counted = outputs > 0 and flips is not None and 0 <= flips <= outputs
    # a check whose calibration kept no diverged outputs (only graph_replay keeps both sides' tokens) measured no
    # deltas: gates.yaml's stand in for those, the calibrated rate still counts
    return CleanFlips(int(flips) if counted else hand.flips, outputs if counted else hand.outputs,
                      hand.span_fraction_delta if span is None else float(span),
                      hand.distinct_2_delta if distinct is None else float(distinct), counted,
                      span is not None and distinct is not None)


def tie_flip_p(flipped, outputs: int, clean: CleanFlips):
    """One-sided Fisher exact p of `flipped` of `outputs` or more at the clean rate; `flipped` may be an array."""
    from scipy.stats import hypergeom

    return hypergeom.sf(np.asarray(flipped) - 1, clean.outputs + outputs, clean.flips + np.asarray(flipped), outputs)


def tie_flip_cap(outputs: int, clean: CleanFlips, alpha: float) -> int:
    """The most tie flips of `outputs` a clean run shows with probability >= 1 - alpha (Fisher exact: it carries the
    clean rate's own uncertainty)."""
    refuted = np.nonzero(tie_flip_p(np.arange(outputs + 1), outputs, clean) <= alpha)[0]
    return int(refuted[0]) - 1 if refuted.size else outputs  # 0 flips has p 1


def clearly_worse(cand: Repetition, ref: Repetition, limits: DegenerationGates,
                  after_flip: CleanFlips | None = None) -> str | None:
    """Why the candidate is clearly more repetitive than the reference, or None; after a tie flip the limits widen by
    the clean runs' largest move after one."""
    span_limit, distinct_limit = limits.span_fraction_margin, limits.distinct_2_margin
    basis, prefix = "margin", ""
    if after_flip is not None:
        span_limit += max(after_flip.span_fraction_delta, 0.0)
        distinct_limit += max(after_flip.distinct_2_delta, 0.0)
        source = "calibrated" if after_flip.deltas_calibrated else "gates.yaml's (uncalibrated)"
        basis, prefix = f"limit after a tie flip: {source} clean max + margin", "collapse after a tie flip: "
    rise, drop = cand.span_fraction - ref.span_fraction, ref.distinct_2 - cand.distinct_2
    if cand.span >= limits.min_span and rise >= span_limit:
        return (f"{prefix}repeated span of {cand.span} of {cand.length} units (reference {ref.span} of {ref.length}; "
                f"{basis} {span_limit:.3g} of the output)")
    if drop >= distinct_limit:
        return (f"{prefix}distinct-2 {cand.distinct_2:.2f} vs reference {ref.distinct_2:.2f} ({basis} "
                f"{distinct_limit:.3g})")
    return None


def judge_pair(request: str, cand: Sequence[Hashable], ref: Sequence[Hashable], limits: DegenerationGates,
               render=None, after_flip: CleanFlips | None = None) -> Degeneration | None:
    """A Degeneration when the candidate's output is clearly more repetitive than the reference's, else None.
    `render(units)` turns the repeated span into the quoted text (default: the units joined by spaces)."""
    c, r = repetition(cand, limits.max_period), repetition(ref, limits.max_period)
    why = clearly_worse(c, r, limits, after_flip)
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
                        limits: DegenerationGates, render=None, tie_flipped: Mapping[str, str] | None = None,
                        calibrated: Mapping | None = None) -> dict:
    """A DegenerationRecord's fields from (request, candidate units, reference units); `tie_flipped` outputs are
    judged for a collapse only and their count capped. `flagged`: the cap's sentence first, then one per output."""
    if not pairs:
        return {"reference": reference, "passed": False, "detail": "no data: no output to judge", "requests": 0,
                "status": "no_data"}
    exempt = tie_flipped or {}
    clean = clean_flips(limits, calibrated)
    found = [d for req, c, r in pairs
             if (d := judge_pair(req, c, r, limits, render, clean if req in exempt else None))]
    flipped = [f"request {req}: {exempt[req]}" for req, _, _ in pairs if req in exempt]
    verdicts = flip_verdicts(len(flipped), len(pairs), clean, limits.tie_flip_alpha)
    detail = (f"{len(found)}/{len(pairs)} output(s) clearly more repetitive than {reference}'s" if found else
              f"no output clearly more repetitive than {reference}'s ({len(pairs) - len(flipped)} compared in full)")
    if flipped:
        detail += f"; {len(flipped)} diverged first at a tie flip, judged for a collapse only ({verdicts.summary})"
    if verdicts.failure:
        detail = f"{verdicts.failure}; {detail}"
    return {"reference": reference, "passed": not found and verdicts.failure is None, "detail": detail,
            "requests": len(pairs), "flagged": [*filter(None, [verdicts.failure]), *map(degeneration_line, found)],
            "tie_flipped": flipped}


@dataclass(frozen=True)
class FlipVerdict:
    summary: str  # the count against its cap, and where the cap came from
    failure: str | None  # the sentence that fails the check (None: within the cap)


def cap_basis(outputs: int, clean: CleanFlips, alpha: float) -> tuple[int, str]:
    """The cap on tie flips of `outputs`, and where it came from (the clause every cap sentence carries)."""
    cap = tie_flip_cap(outputs, clean, alpha)
    basis = "calibrated clean rate" if clean.rate_calibrated else "uncalibrated: gates.yaml's clean rate"
    return cap, (f"{basis} {clean.rate:.3g} ({clean.flips} of {clean.outputs} a repeat), cap {cap}: one-sided Fisher "
                 f"exact test, alpha {alpha:.2g}")


def too_many_tie_flips(flipped: int, outputs: int, clean: CleanFlips, alpha: float) -> str | None:
    """The sentence that fails a check exempting `flipped` of its `outputs` as tie flips; None within the cap."""
    cap, why = cap_basis(outputs, clean, alpha)
    return (f"too many tie flips: {flipped} of {outputs} outputs diverged first at a tie flip ({why})"
            if flipped > cap else None)


def flip_verdicts(flipped: int, outputs: int, clean: CleanFlips, alpha: float) -> FlipVerdict:
    """The tie flips of one run against their cap; every output flipped judged nothing and fails at any cap."""
    _, why = cap_basis(outputs, clean, alpha)
    if outputs and flipped == outputs:
        return FlipVerdict(f"{flipped} of {outputs}; {why}", f"no output judged: all {outputs} diverged first at a "
                           f"tie flip ({why})")
    if failure := too_many_tie_flips(flipped, outputs, clean, alpha):
        return FlipVerdict(f"{flipped} of {outputs}; {why}", failure)
    return FlipVerdict(f"{flipped} of {outputs} within the cap; {why}", None)
