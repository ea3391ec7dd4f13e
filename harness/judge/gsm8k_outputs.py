"""GSM8K's answers compared token by token (pure), re-encoded with the model's tokenizer: on a weak model accuracy has
no signal, the answers still do. lm-eval keeps no logprobs, so a divergence cannot be told from a tie flip: the
judgement is a count, `gsm8k.max_diverged_answers` per arm, set on a good build (docs/suites.md)."""

from __future__ import annotations

from collections.abc import Callable
from math import ceil

from harness.records.schema import RequestComparison

CHECK = "gsm8k_outputs"


def compare_answers(candidate: dict[int, str], reference: dict[int, str],
                    encode: Callable[[str], list[int]]) -> list[RequestComparison]:
    """One comparison per question either arm answered: the first differing token (or the shorter answer's end). A
    question one arm has no answer for (a request error) diverges at token 0: a missing answer is never a match."""
    out = []
    for q in sorted(candidate.keys() | reference.keys()):
        if q not in candidate or q not in reference:
            missing = "candidate" if q not in candidate else "reference"
            out.append(RequestComparison(request=f"question {q} (no {missing} answer)", prompt_tokens=0, exact=False,
                                         first_divergence=0, candidate_tokens=0, reference_tokens=0, finite=True,
                                         max_drift=None, group="GSM8K answer"))
            continue
        cand, ref = encode(candidate[q]), encode(reference[q])
        n = min(len(cand), len(ref))
        first = next((i for i in range(n) if cand[i] != ref[i]), n if len(cand) != len(ref) else None)
        out.append(RequestComparison(request=f"question {q}", prompt_tokens=0, exact=first is None,
                                     first_divergence=first, candidate_tokens=len(cand), reference_tokens=len(ref),
                                     finite=True, max_drift=None, group="GSM8K answer"))
    return out


def answers_verdict(comparisons: list[RequestComparison], allowed: int | None) -> tuple[bool, str, list[str]]:
    """(passed, detail, one line per diverging answer): at most `allowed` answers may differ (None: not judged, the
    numbers only); no question compared at all is a failure (no data)."""
    diverged = [c for c in comparisons if not c.exact]
    lines = [f"{c.request}: token {c.first_divergence} differs ({c.candidate_tokens} vs {c.reference_tokens} tokens)"
             for c in diverged]
    if not comparisons:
        return False, f"{CHECK}: no data (no question answered by either arm)", ["no comparisons"]
    firsts = sorted(c.first_divergence for c in diverged)
    detail = (f"{CHECK}: {len(comparisons) - len(diverged)}/{len(comparisons)} answers identical token by token"
              + (f", first divergence at token {firsts[0]}" if firsts else "")
              + (f" (at most {allowed} may differ)" if allowed is not None else ""))
    return allowed is not None and len(diverged) <= allowed, detail, lines


def without_limit(arm: str, detail: str, required: bool) -> tuple[bool, str]:
    """An arm whose gates.yaml section sets no max_diverged_answers: (whether that fails the check, the sentence).
    `required` (the arm's reference_checks.require_floor): FAIL "not measured for this arm", never a skip; else not
    judged, the sentence quoting the numbers."""
    setting = f"gates.yaml arms.{arm}.gsm8k.max_diverged_answers is unset"
    if required:
        return True, (f"{CHECK}: not measured for this arm: {setting} ({detail}); set it from clean runs of a good "
                      "build of the pair: the most answers that differed in one of them, plus the bound docs/gates.md "
                      "states")
    return False, (f"{detail}; not judged on arm {arm!r}: {setting} (lm-eval keeps no logprobs, so a tie flip cannot "
                   "be told apart: set it from a clean run)")


def diverged_answers_limit(counts: list[int], questions: int, alpha: float = 0.01) -> tuple[int, str]:
    """max_diverged_answers from K clean runs' diverged counts, and its gates.yaml sentence: the largest of the clean
    count, a binomial quantile at the rate's upper bound, and a Student-t prediction bound."""
    from scipy.stats import beta, binom, t

    if len(counts) < 2 or questions < 1 or any(not 0 <= c <= questions for c in counts):
        raise ValueError(f"counts {counts} of {questions} questions: at least two runs, each 0..questions")
    k, total = len(counts), sum(counts)
    upper = 1.0 if total == k * questions else float(beta.ppf(0.95, total + 1, k * questions - total))
    pooled = int(binom.ppf(1 - alpha, questions, upper))
    mean, sd = total / k, (sum((c - total / k) ** 2 for c in counts) / (k - 1)) ** 0.5
    spread = ceil(mean + float(t.ppf(1 - alpha, k - 1)) * sd * (1 + 1 / k) ** 0.5)
    limit = min(questions, max(max(counts), pooled, spread))
    return limit, (f"{k} clean runs diverged on {', '.join(map(str, counts))} of {questions} answers: binomial "
                   f"{1 - alpha:.0%} bound {pooled} (pooled rate <= {upper:.4f}), t prediction bound {spread}")
