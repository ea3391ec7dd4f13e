"""Candidate outputs against reference outputs (pure): exact tokens, first divergence, finiteness, drift."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.measure.generation import Generation
from harness.records.schema import RequestComparison, TeacherForcedComparison


def compare_outputs(request: str, prompt_tokens: int, cand: Generation, ref: Generation,
                    group: str = "") -> RequestComparison:
    """Drift is max |delta logprob| of the chosen tokens before the first divergence: after it, the two arms
    condition on different text and their logprobs are no longer comparable."""
    n = min(len(cand.token_ids), len(ref.token_ids))
    first = next((i for i in range(n) if cand.token_ids[i] != ref.token_ids[i]), None)
    if first is None and len(cand.token_ids) != len(ref.token_ids):
        first = n
    upto = n if first is None else first
    deltas = [abs(a - b) for a, b in zip(cand.logprobs[:upto], ref.logprobs[:upto], strict=False)]
    drift = max(deltas) if deltas else None
    if drift is not None and not math.isfinite(drift):
        drift = math.inf
    finite = all(math.isfinite(x) for x in cand.logprobs) and len(cand.logprobs) == len(cand.token_ids)
    return RequestComparison(request=request, prompt_tokens=prompt_tokens, exact=first is None,
                             first_divergence=first, candidate_tokens=len(cand.token_ids),
                             reference_tokens=len(ref.token_ids), finite=finite, max_drift=drift, group=group,
                             reference_gap_at_divergence=top_gap(ref, first), deltas=stored_deltas(deltas))


def stored_deltas(deltas: list[float]) -> list[float | None]:
    """Seven significant digits (float32 logprobs carry about that many), None for a non-finite delta."""
    return [float(f"{d:.7g}") if math.isfinite(d) else None for d in deltas]


def top_gap(gen: Generation, position: int | None) -> float | None:
    if position is None or position >= len(gen.top):
        return None
    values = sorted(gen.top[position].values(), reverse=True)
    return values[0] - values[1] if len(values) >= 2 else None


@dataclass(frozen=True)
class Judgement:
    passed: bool
    detail: str
    failures: list[str]  # one line per failing request


def is_tie_flip(c: RequestComparison, tie_gap: float) -> bool:
    """A divergence where the reference itself scored both tokens within `tie_gap`: a rounding-level flip of an
    (almost) tied argmax, not evidence of a wrong computation. Drift before it is still judged."""
    gap = c.reference_gap_at_divergence
    # Logprobs arrive as float32: a one-bf16-step gap of 0.125 comes back as 0.12500000xx.
    return not c.exact and gap is not None and gap <= tie_gap * (1 + 1e-5) + 1e-7


def tie_flipped(comparisons: list[RequestComparison], tie_gap: float) -> dict[str, str]:
    """request -> where its first divergence was a tie flip (the degeneration detector leaves those unjudged)."""
    return {c.request: (f"token {c.first_divergence}, reference top-2 gap {c.reference_gap_at_divergence:.3g} "
                        f"<= tie_gap {tie_gap:g}")
            for c in comparisons if is_tie_flip(c, tie_gap)}


def failure_line(c: RequestComparison, drift_limit: float, tie_gap: float = 0.0) -> str | None:
    where = f"request {c.request}" + (f" [{c.group}]" if c.group else "")
    problems = []
    if not c.exact and not is_tie_flip(c, tie_gap):
        gap = "" if c.reference_gap_at_divergence is None else (
            f", where the reference's top-2 gap is {c.reference_gap_at_divergence:.3g}")
        problems.append(f"generated token {c.first_divergence} differs from the reference "
                        f"({c.candidate_tokens} vs {c.reference_tokens} tokens{gap})")
    if not c.finite:
        problems.append("non-finite logprob")
    if c.max_drift is not None and c.max_drift > drift_limit:
        problems.append(f"max |delta logprob| {c.max_drift:.3g} > {drift_limit:g}")
    return f"{where}: " + "; ".join(problems) if problems else None


def judge_comparisons(check: str, comparisons: list[RequestComparison], drift_limit: float,
                      tie_gap: float = 0.0) -> Judgement:
    failures = [line for c in comparisons if (line := failure_line(c, drift_limit, tie_gap))]
    exact = sum(c.exact for c in comparisons)
    ties = sum(is_tie_flip(c, tie_gap) for c in comparisons)
    drifts = [c.max_drift for c in comparisons if c.max_drift is not None]
    summary = f"{check}: {exact}/{len(comparisons)} exact" + (f", {ties} tie flip(s) (reference gap <= {tie_gap:g})"
                                                              if ties else "")
    if drifts:
        summary += f", max drift {max(drifts):.3g} (limit {drift_limit:g})"
    if not comparisons:
        return Judgement(False, f"{check}: no request was compared", ["no comparisons"])
    return Judgement(not failures, summary if not failures else summary + "; " + f"{len(failures)} request(s) failed",
                   failures)


def compared_to(c: RequestComparison) -> int:
    """The context (prompt + generated tokens) up to which one comparison looked at the outputs: teacher forcing
    scores every reference position; a generation is compared up to and including its first divergence."""
    if isinstance(c, TeacherForcedComparison):
        return c.prompt_tokens + c.reference_tokens
    if c.first_divergence is None:
        return c.prompt_tokens + min(c.candidate_tokens, c.reference_tokens)
    return c.prompt_tokens + c.first_divergence + 1


def checked_to(comparisons: list[RequestComparison]) -> int | None:
    """The longest context a check compared outputs at (ReferenceCheckRecord.checked_to_tokens); None: nothing."""
    return max(map(compared_to, comparisons), default=None)


def generated_to(comparisons: list[RequestComparison]) -> int | None:
    """The most generated tokens of one output a check compared (ReferenceCheckRecord.checked_generated_tokens)."""
    return max((compared_to(c) - c.prompt_tokens for c in comparisons), default=None)


def summary_fields(comparisons: list[RequestComparison], tie_gap: float = 0.0) -> dict:
    """The ReferenceCheckRecord numbers computed from the per-request comparisons."""
    divergences = [c.first_divergence for c in comparisons if c.first_divergence is not None]
    drifts = [c.max_drift for c in comparisons if c.max_drift is not None]
    return {"requests": len(comparisons), "exact_matches": sum(c.exact for c in comparisons),
            "first_divergence_min": min(divergences) if divergences else None,
            "max_drift": max(drifts) if drifts else None,
            "nonfinite": sum(not c.finite for c in comparisons),
            "tie_flips": sum(is_tie_flip(c, tie_gap) for c in comparisons), "tie_gap": tie_gap,
            "checked_generated_tokens": generated_to(comparisons)}
