"""A check's clean spread over K calibration repeats, the limits derived from it, and its false-positive rate (pure).

`harness calibrate` runs an arm's checks K times against the stored reference on a build taken as good (each repeat
another batch composition and arrival order, each after a server start, so CUDA graphs are recaptured). Per check:

- drift limit = a prediction bound for one more clean run: the largest request mean of the max |delta logprob| over
  the K repeats + the run-to-run deviation that run exceeds with probability ALPHA / n (n requests: a clean run
  crosses the limit somewhere with probability about ALPHA), from an exponential tail fitted to the top 10 % of the
  pooled deviations of each request from its own mean (peaks over threshold; run-to-run noise is heavy-tailed, not
  Gaussian); never below the largest clean value x (1 + margin) nor the seed's
  1e-2 (a bit-exact pair measures 0, and no limit can be 0). The same prompts are sent every run, so what a limit
  must absorb is how much one request's drift moves between runs, not how the drift is spread across requests:
  on the H200 teacher forcing repeats bit-identically (s = 0; limit = its max 1.57 x 1.25), graph_replay's drift
  moves with the batch composition. The max of K repeats alone is no limit where runs do move: a fourth repeat's
  max exceeds the first three's one time in four (tests/judge/test_calibration.py);
- tie gap = the same estimate over the reference top-2 gaps at which clean repeats diverged (ALPHA / the divergences
  per run), with ten or more of them; else their largest x (1 + margin); never below the configured one (a bound
  derived from the noise itself, e.g. the CPU jitter's 2 sqrt(3) sigma, stays in force);
- floor = per request and position the mean |delta| over the repeats: what later runs are paired against
  (harness/judge/drift_floor.py). The mean, not the median: the per-request test pairs mean |delta| over positions,
  which a per-position median of a skewed |delta| biases low (a clean repeat then "drifts more": measured, 1 false
  alarm in 4 clean repeats); against the mean the per-position sign test is, if anything, conservative.

The false-positive rate is measured, not assumed: each repeat is judged, as a later run would be, by the limits and
floor derived from the other repeats (leave one out); a repeat that would fail counts as a false positive.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.judge.drift_floor import judge_against_floor, pair_key
from harness.records.schema import RequestComparison

MARGIN = 0.25  # above the largest clean value measured: K repeats rarely see the very tail
ALPHA = 0.01  # a clean run exceeds a derived limit somewhere this often (before the margin)
TAIL_SHARE = 0.1  # the share of the clean values the exponential tail is fitted to
MIN_TAIL = 10  # fewer values than this: no tail fit, the largest value x (1 + margin)


@dataclass(frozen=True)
class Spread:
    """What K clean repeats of one check measured."""

    repeats: int
    requests: int  # per repeat (the largest count)
    exact_rate: float  # exact requests / requests, over all repeats
    max_drift: float  # the largest per-request max |delta logprob|
    drift_p50: float | None  # per-position |delta|, pooled over the repeats
    drift_p99: float | None
    flip_gaps: list[float]  # reference top-2 gap at every clean divergence (sorted)
    divergences: int  # clean divergences over all repeats
    nonfinite: int
    request_drifts: dict[str, list[float]]  # request -> its max |delta| in each repeat that measured it


@dataclass(frozen=True)
class Limits:
    drift_limit: float
    tie_gap: float
    derivation: str  # one line: how the two numbers came out of the spread


def quantile(values: Sequence[float], q: float) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def spread(repeats: Sequence[Sequence[RequestComparison]]) -> Spread:
    comparisons = [c for r in repeats for c in r]
    drifts = [c.max_drift for c in comparisons if c.max_drift is not None and math.isfinite(c.max_drift)]
    positions = [d for c in comparisons for d in c.deltas if d is not None]
    gaps = sorted(c.reference_gap_at_divergence for c in comparisons
                  if not c.exact and c.reference_gap_at_divergence is not None)
    per_request: dict[str, list[float]] = {}
    for c in comparisons:
        if c.max_drift is not None and math.isfinite(c.max_drift):
            per_request.setdefault(pair_key(c), []).append(c.max_drift)
    return Spread(len(repeats), max((len(r) for r in repeats), default=0),
                  sum(c.exact for c in comparisons) / len(comparisons) if comparisons else 0.0,
                  max(drifts, default=0.0), quantile(positions, 0.5), quantile(positions, 0.99), gaps,
                  sum(not c.exact for c in comparisons), sum(not c.finite for c in comparisons), per_request)


def run_to_run_deviations(per_request: dict[str, list[float]]) -> list[float]:
    """Each value's deviation from its own request's mean over the repeats, scaled to what one more run deviates from
    that mean (x sqrt((K + 1) / (K - 1)): a deviation from a mean of K values understates one from the true mean);
    requests measured once give none."""
    out = []
    for values in per_request.values():
        k = len(values)
        if k > 1:
            mean = statistics.fmean(values)
            out += [(v - mean) * math.sqrt((k + 1) / (k - 1)) for v in values]
    return out


def prediction_bound(per_request: dict[str, list[float]], alpha: float = ALPHA) -> float | None:
    """The level one more clean run's per-request max drift stays under, every request at once with probability
    ~1 - alpha: the largest request mean plus the run-to-run deviation exceeded with probability alpha / n, from an
    exponential tail fitted to the top TAIL_SHARE of the pooled deviations (heavy-tailed noise is not Gaussian).
    None without a request measured twice."""
    deviations = run_to_run_deviations(per_request)
    if not deviations:
        return None
    top_mean = max(statistics.fmean(v) for v in per_request.values())
    # one value exceeds the level with probability alpha / n: the tail's rate per value, not per len(values)
    level = tail_level(deviations, len(deviations), alpha / len(per_request))
    largest = max(deviations)
    return top_mean + max(largest, level if level is not None else largest, 0.0)


def tail_level(values: Sequence[float], repeats: int, alpha: float = ALPHA) -> float | None:
    """The level one more run's largest of its len(values) / repeats values exceeds with probability ~alpha: an
    exponential tail fitted to the top TAIL_SHARE of the values (peaks over threshold: u the threshold, sigma the
    mean excess, level = u + sigma ln(top / (repeats x alpha))); None with too few values."""
    ordered = sorted(values, reverse=True)
    top = max(MIN_TAIL // 2, int(len(ordered) * TAIL_SHARE))
    if len(ordered) < MIN_TAIL or top >= len(ordered):
        return None
    threshold = ordered[top]
    excess = sum(v - threshold for v in ordered[:top]) / top
    return threshold + excess * math.log(top / (repeats * alpha))


def derive_limits(s: Spread, least_limit: float, least_tie_gap: float, margin: float = MARGIN) -> Limits:
    largest_gap = max(s.flip_gaps, default=0.0)
    tail = prediction_bound(s.request_drifts)
    gap_tail = tail_level(s.flip_gaps, s.repeats)
    limit = max(least_limit, s.max_drift * (1 + margin), tail or 0.0)
    gap = max(least_tie_gap, largest_gap * (1 + margin), gap_tail or 0.0)
    tail_text = "n/a" if tail is None else f"{tail:.3g}"
    gap_text = "n/a" if gap_tail is None else f"{gap_tail:.3g}"
    moved = max((abs(d) for d in run_to_run_deviations(s.request_drifts)), default=0.0)
    why = (f"drift limit {limit:.3g} = max(prediction bound {tail_text} (largest run-to-run move {moved:.3g}, "
           f"{len(s.request_drifts)} requests, alpha {ALPHA:g} per run), clean max {s.max_drift:.3g} x "
           f"(1 + {margin:g}), floor {least_limit:g}); tie gap {gap:.3g} = max(tail estimate {gap_text} "
           f"({len(s.flip_gaps)} divergences), largest clean flip gap {largest_gap:.3g} x (1 + {margin:g}), "
           f"configured {least_tie_gap:g}); K = {s.repeats}")
    return Limits(limit, gap, why)


def mean_floor(repeats: Sequence[Sequence[RequestComparison]]) -> list[RequestComparison]:
    """Per request (and group) the mean |delta| at each position over the repeats that scored it; the other fields
    from the first repeat that has the request. What later runs' drift is paired against."""
    by_key: dict[str, list[RequestComparison]] = {}
    for r in repeats:
        for c in r:
            by_key.setdefault(pair_key(c), []).append(c)
    out = []
    for same in by_key.values():
        longest = max(len(c.deltas) for c in same)
        deltas = []
        for i in range(longest):
            values = [c.deltas[i] for c in same if i < len(c.deltas) and c.deltas[i] is not None]
            deltas.append(float(f"{statistics.fmean(values):.7g}") if values else None)
        finite = [d for d in deltas if d is not None]
        out.append(same[0].model_copy(update={"deltas": deltas, "max_drift": max(finite) if finite else None}))
    return out


@dataclass(frozen=True)
class LeaveOneOut:
    passed: int  # repeats that pass the limits and floor of the others
    repeats: int
    failures: list[str]  # per failing repeat: why

    @property
    def sentence(self) -> str:
        text = f"clean repeats {self.passed}/{self.repeats} PASS (each judged by the others' limits and floor)"
        return text + ("; " + "; ".join(self.failures) if self.failures else "")


# The fixed-limit part of a reference check's verdict for one request under some limits (harness/refcheck/compare.py's
# failure_line: a divergence beyond the tie gap, a non-finite logprob, drift over the limit), passed in by the caller.
OverLimits = Callable[[RequestComparison, Limits], bool]


def leave_one_out(repeats: Sequence[Sequence[RequestComparison]], least_limit: float, least_tie_gap: float,
                  over_limits: OverLimits, margin: float = MARGIN) -> LeaveOneOut:
    """Each repeat judged as a later run would be, against the limits and mean floor derived from the others."""
    failures = []
    for k, mine in enumerate(repeats):
        others = [r for j, r in enumerate(repeats) if j != k]
        if not others:
            break
        limits = derive_limits(spread(others), least_limit, least_tie_gap, margin)
        bad = [c.request for c in mine if over_limits(c, limits)]
        floor = judge_against_floor(mine, mean_floor(others), f"the other {len(others)} repeat(s)")
        why = ([f"{len(bad)} request(s) over the limits ({', '.join(bad[:3])})"] if bad else []) + (
            [] if floor.passed else [floor.sentence])
        if why:
            failures.append(f"repeat {k + 1}: " + "; ".join(why))
    return LeaveOneOut(len(repeats) - len(failures) if len(repeats) > 1 else 0, len(repeats), failures)
