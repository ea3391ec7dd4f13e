"""Judging the long_context grid (pure): each (length, depth, mode) cell from its comparison with the reference, its
retrieval accuracy beside the reference's, and its proven prefix-cache hit; then the first failing length.

The limits are the check's (CellLimits: its ReferenceCheck's drift limit and tie gap, calibrated or gates.yaml
reference_checks') plus long_context.retrieval_margin: the candidate may copy at most that much less of the span than
the reference did.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.records.schema import LongContextCell, RequestComparison, TeacherForcedComparison
from harness.refcheck.judging.check import ReferenceCheck
from harness.refcheck.judging.compare import failure_line, is_tie_flip
from harness.refcheck.prompts.long_context import ContextCell
from harness.tinymodel.copytask import copy_accuracy


@dataclass(frozen=True)
class CellLimits:
    """What one of the grid's checks judges a cell by: the check (its limits: calibrated, or gates.yaml's) and
    gates.yaml long_context.retrieval_margin."""

    check: ReferenceCheck
    margin: float

    @property
    def drift_limit(self) -> float:
        return self.check.drift_limit

    @property
    def tie_gap(self) -> float:
        return self.check.tie_gap

    def failure(self, c: RequestComparison | TeacherForcedComparison) -> str | None:
        """The comparison's own failure (drift, tokens) under these limits; None where it passes."""
        return failure_line(c, self.drift_limit, self.tie_gap)


@dataclass(frozen=True)
class CellOutput:
    """A candidate output of a cell beside the reference's: their comparison and both sides' tokens (the copy
    accuracy is read from the tokens)."""

    cell: ContextCell
    vs_reference: RequestComparison
    candidate_tokens: list[int]
    reference_tokens: list[int]

    def copy_accuracies(self) -> tuple[float, float]:
        """(the candidate's copy accuracy of the span, the reference's)."""
        return (copy_accuracy(self.candidate_tokens, self.cell.expected),
                copy_accuracy(self.reference_tokens, self.cell.expected))

    def compared_tokens(self) -> int:
        """Generated tokens the comparison vouches for: all of them, or up to the first divergence."""
        c = self.vs_reference
        return c.candidate_tokens if c.first_divergence is None else c.first_divergence + 1


def retrieval_drop(cand: float, ref: float, margin: float) -> str | None:
    if cand < ref - margin:
        return f"retrieval accuracy {cand:.2f} < reference {ref:.2f} - margin {margin:g}"
    return None


def hit_missing(mode: str, hit: float | None, expected: int | None) -> str | None:
    """`expected` None: the arm has prefix caching off, there is no hit to prove (the record says so)."""
    if expected is None:
        return None
    if hit is None:
        return f"{mode}: /metrics has no vllm:prefix_cache_hits counter; the hit cannot be proven"
    if hit < expected:
        return f"{mode}: prefix-cache hits {hit:g} tokens < {expected} expected (the cached prefix was not reused)"
    return None


def judge_generation(out: CellOutput, mode: str, limits: CellLimits, hit: float | None = None,
                     hit_expected: int | None = None) -> LongContextCell:
    """A cold, warm, partial or sweep request's output against the reference's cold output of the same cell."""
    cell, c = out.cell, out.vs_reference
    acc_c, acc_r = out.copy_accuracies()
    where = f"request {c.request} [{c.group}]: "
    missing, drop = hit_missing(mode, hit, hit_expected), retrieval_drop(acc_c, acc_r, limits.margin)
    failures = [p for p in (limits.failure(c), missing and where + missing, drop and where + drop) if p]
    return LongContextCell(length=cell.length, depth=cell.depth, mode=mode, exact=c.exact,
                           first_divergence=c.first_divergence, tie_flip=is_tie_flip(c, limits.tie_gap),
                           max_drift=c.max_drift, retrieval_candidate=acc_c, retrieval_reference=acc_r,
                           cached_tokens=hit, context_tokens=len(cell.tokens) + out.compared_tokens(),
                           passed=not failures, failures=failures)


def judge_forced(cell: ContextCell, c: TeacherForcedComparison, limits: CellLimits) -> LongContextCell:
    """The reference's tokens scored on the candidate: every position judged, conditioned on the same text."""
    line = limits.failure(c)
    return LongContextCell(length=cell.length, depth=cell.depth, mode="forced", exact=c.exact,
                           first_divergence=c.first_divergence, tie_flip=is_tie_flip(c, limits.tie_gap),
                           forced_max_drift=c.max_drift, context_tokens=len(cell.tokens) + c.reference_tokens,
                           passed=line is None, failures=[line] if line else [])


def first_failing_length(cells: list[LongContextCell]) -> int | None:
    """The shortest prompt length with any failing cell."""
    return min((c.length for c in cells if not c.passed), default=None)


def checked_to_tokens(cells: list[LongContextCell]) -> int | None:
    """The longest context (prompt + compared tokens) of any cell compared."""
    return max((c.context_tokens for c in cells), default=None)


def grid_summary(cells: list[LongContextCell], planned: int) -> str:
    """'36/36 cells pass (cold 12/12, warm 12/12, ...); checked to 4,016 tokens' or where the grid first fails."""
    by_mode: dict[str, list[LongContextCell]] = {}
    for c in cells:
        by_mode.setdefault(c.mode, []).append(c)
    modes = ", ".join(f"{m} {sum(c.passed for c in cs)}/{len(cs)}" for m, cs in by_mode.items())
    passed = sum(c.passed for c in cells)
    out = f"{passed}/{len(cells)} cells pass" + (f" ({modes})" if modes else "")
    if len(cells) < planned:
        out += f"; {planned - len(cells)} of {planned} cells not compared"
    first = first_failing_length(cells)
    if first is not None:
        failing = sorted({f"d{c.depth:g} {c.mode}" for c in cells if c.length == first and not c.passed})
        out += f"; first failing length {first:,} tokens ({', '.join(failing)})"
    to = checked_to_tokens(cells)
    return out + (f"; outputs checked to {to:,} tokens" if to else "")
