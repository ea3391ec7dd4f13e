"""A check's clean spread over K calibration repeats, the limits derived from it, and its false-positive rate (pure).

Per check: a drift limit and tie gap as prediction bounds for one more clean run (an exponential tail over how much
each request moves between runs), a floor of per-position mean |delta| that later runs are paired against, each
bounded by ceilings and a move factor; the false-positive rate is measured by holding each repeat out. Derivation
and measurements: docs/gates.md ("Derivation, bounded", "False positives, stated honestly").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.config.thresholds import CalibrationGates
from harness.judge.drift_floor import MIN_RUN_SHIFTS, judge_floor_pairing, mean_shift, pair_key, unstated_budget
from harness.judge.error_budget import Family, RunBudget, part_alpha, rounding_unit
from harness.records.schema import RequestComparison

ALPHA = 0.01  # the seed's level, per check; calibrate derives at the run's budget (derive_limits)
TAIL_SHARE = 0.1  # the share of the clean values the exponential tail is fitted to
MIN_TAIL = 10  # fewer values than this: no tail fit, the largest value
# why no margin on the limits (tests/judge/test_calibration.py reproduces it; docs/gates.md, "Derivation, bounded")
MARGIN_MEASURED = ("no margin: a held-out clean repeat exceeds the others' prediction bound 2 times in 1,000 "
                   "simulated (their max x 1.25: 49; their max: 200)")
CONFIDENCE = 0.95  # the false-positive intervals' (exact, Clopper-Pearson)


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
    """Each value's deviation from its request's mean, x sqrt((K + 1) / (K - 1)) (a deviation from a mean of K
    understates one from the true mean); requests measured once give none."""
    out = []
    for values in per_request.values():
        k = len(values)
        if k > 1:
            mean = statistics.fmean(values)
            out += [(v - mean) * math.sqrt((k + 1) / (k - 1)) for v in values]
    return out


def prediction_bound(per_request: dict[str, list[float]], alpha: float = ALPHA) -> float | None:
    """The level one more clean run's per-request max drift stays under (all requests, probability ~1 - alpha): the
    largest request mean plus an exponential-tail deviation; None without a request measured twice."""
    deviations = run_to_run_deviations(per_request)
    if not deviations:
        return None
    top_mean = max(statistics.fmean(v) for v in per_request.values())
    # one value exceeds the level with probability alpha / n: the tail's rate per value, not per len(values)
    level = tail_level(deviations, len(deviations), alpha / len(per_request))
    largest = max(deviations)
    return top_mean + max(largest, level if level is not None else largest, 0.0)


def tail_level(values: Sequence[float], repeats: int, alpha: float = ALPHA) -> float | None:
    """The level one more run's largest value exceeds with probability ~alpha: peaks over threshold on the top
    TAIL_SHARE, u + sigma ln(top / (repeats x alpha)); None with too few values."""
    ordered = sorted(values, reverse=True)
    top = max(MIN_TAIL // 2, int(len(ordered) * TAIL_SHARE))
    if len(ordered) < MIN_TAIL or top >= len(ordered):
        return None
    threshold = ordered[top]
    excess = sum(v - threshold for v in ordered[:top]) / top
    return threshold + excess * math.log(top / (repeats * alpha))


def derive_limits(s: Spread, least_limit: float, least_tie_gap: float, family: Family | None = None) -> Limits:
    """Both limits at their part of the run's budget; the drift limit at least the clean max plus the rounding unit,
    so bit-identical repeats do not fail the next legitimate build by a rounding step."""
    family = family if family is not None else unstated_budget().family
    alpha, gap_alpha = part_alpha(family, "drift limit"), part_alpha(family, "tie gap")
    largest_gap = max(s.flip_gaps, default=0.0)
    tail = prediction_bound(s.request_drifts, alpha)
    gap_tail = tail_level(s.flip_gaps, s.repeats, gap_alpha)
    moved = max((abs(d) for d in run_to_run_deviations(s.request_drifts)), default=0.0)
    unit = rounding_unit(s.drift_p50, moved)
    limit = max(least_limit, s.max_drift + unit.value, tail or 0.0)
    gap = max(least_tie_gap, largest_gap, gap_tail or 0.0)
    tail_text = "n/a" if tail is None else f"{tail:.3g}"
    gap_text = "n/a" if gap_tail is None else f"{gap_tail:.3g}"
    why = (f"drift limit {limit:.3g} = max(prediction bound {tail_text} (largest run-to-run move {moved:.3g}, "
           f"{len(s.request_drifts)} requests, alpha {alpha:.2g}: {family.text}), clean max {s.max_drift:.3g} + "
           f"rounding unit {unit.value:.2g} ({unit.derivation}), floor {least_limit:g}); tie gap {gap:.3g} = "
           f"max(tail estimate {gap_text} ({len(s.flip_gaps)} divergences, alpha {gap_alpha:.2g}), largest clean flip "
           f"gap {largest_gap:.3g}, configured {least_tie_gap:g}); {MARGIN_MEASURED}; K = {s.repeats}")
    return Limits(limit, gap, why)


def ceiling_violations(check: str, limits: Limits, s: Spread, ceilings: CalibrationGates, where: str,
                       deltas: tuple[float | None, float | None] = (None, None)) -> list[str]:
    """One sentence per derived value above its ceiling (limits, the clean tie-flip rate, the degeneration `deltas`),
    naming the key that sets it; any refuses the calibration, --trust included (no clean build measures that much)."""
    step = ceilings.logit_step
    drift_ceiling, drift_key = ceilings.drift_ceiling(check)
    values = [("drift limit", limits.drift_limit, drift_ceiling, drift_key),
              ("tie gap", limits.tie_gap, ceilings.max_tie_gap, "calibration.max_tie_gap"),
              ("median position drift", s.drift_p50, ceilings.max_drift_p50, "calibration.max_drift_p50")]
    out = [f"{check}: {name} {value:.3g} ({value / step:.3g} logit steps of {step:g}) is above its ceiling "
           f"{ceiling:g} ({key} in {where}); a clean build of this arm does not measure that: a fault in the "
           "calibrated build, or a ceiling to measure again"
           for name, value, ceiling, key in values if value is not None and value > ceiling]
    flips = -(-s.divergences // s.repeats) if s.repeats > 0 else 0
    rate_ceiling, rate_key = ceilings.tie_flip_ceiling(check)
    shares = [(f"clean tie-flip rate ({flips} of {s.requests} outputs a repeat)",
               flips / s.requests if s.requests else None, rate_ceiling, rate_key),
              ("largest clean span-fraction rise after a flip", deltas[0], ceilings.max_span_fraction_delta,
               "calibration.max_span_fraction_delta"),
              ("largest clean distinct-2 drop after a flip", deltas[1], ceilings.max_distinct_2_delta,
               "calibration.max_distinct_2_delta")]
    return out + [f"{check}: {name} {value:.3g} is above its ceiling {ceiling:g} ({key} in {where}); a clean build "
                  "of this arm does not measure that, and the degeneration detector would judge by it: a fault in "
                  "the calibrated build, or a ceiling to measure again"
                  for name, value, ceiling, key in shares if value is not None and value > ceiling]


def limit_moves(check: str, limits: Limits, previous: Limits | None, max_move_factor: float,
                logit_step: float) -> list[str]:
    """One sentence per limit that moved more than max_move_factor from the previous calibration (None: a first
    one); tie gaps compared from one logit_step up (below it a flip is quantisation). Stored only with --trust."""
    if previous is None:
        return []
    pairs = [("drift limit", limits.drift_limit, previous.drift_limit, 0.0),
             ("tie gap", limits.tie_gap, previous.tie_gap, logit_step)]
    out = []
    for name, new, old, least in pairs:
        factor = max(new, least) / max(old, least, 1e-300)
        if factor > max_move_factor or factor < 1 / max_move_factor:
            direction = f"rose {factor:.3g}x" if factor > 1 else f"fell {1 / factor:.3g}x"
            out.append(f"{check}: {name} {old:.3g} -> {new:.3g} {direction}, more than calibration.max_move_factor "
                       f"{max_move_factor:g} allows from the previous calibration; store it only with --trust "
                       "\"reason\"")
    return out


def mean_floor(repeats: Sequence[Sequence[RequestComparison]]) -> list[RequestComparison]:
    """Per request the mean |delta| at each position over the repeats (the mean, not the median: docs/gates.md);
    what later runs' drift is paired against."""
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


def bit_identical(repeats: Sequence[Sequence[RequestComparison]]) -> bool:
    """Every repeat measured the same requests with the same result, to the last digit."""
    keyed = [{pair_key(c): c.model_dump() for c in r} for r in repeats]
    return len(repeats) > 1 and all(k == keyed[0] for k in keyed[1:])


def clopper_pearson(hits: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact two-sided interval of a binomial rate hits / n."""
    from scipy.stats import beta  # scipy only where a rate is stated

    tail = (1 - confidence) / 2
    low = 0.0 if hits == 0 else float(beta.ppf(tail, hits, n - hits + 1))
    high = 1.0 if hits == n else float(beta.ppf(1 - tail, hits + 1, n - hits))
    return low, high


def percent(interval: tuple[float, float]) -> str:
    return f"{100 * interval[0]:.2g}-{100 * interval[1]:.2g} %"


@dataclass(frozen=True)
class FalsePositives:
    """What K clean repeats can say about how often a clean run fails this check's calibration."""

    repeats: int
    deterministic: bool  # bit-identical repeats: no rate is measurable from them, none is claimed
    failed_repeats: int  # held-out repeats that failed the limits or the floor of the others
    requests: int  # held-out requests judged (every request of every repeat)
    requests_over: int  # of them, over the others' fixed limits (drift limit, tie gap, non-finite)
    repeat_interval: tuple[float, float] | None  # exact 95 % interval of failed_repeats / repeats
    request_interval: tuple[float, float] | None  # requests_over / requests: recorded, never stated (not independent)
    failures: list[str]  # per failing held-out repeat: why

    @property
    def short(self) -> str:
        """The statement alone (a report's one line): no "; " inside."""
        if self.deterministic:
            return f"deterministic over {self.repeats} repeats (bit-identical: no false-positive rate measurable)"
        if self.repeat_interval is None or self.request_interval is None:
            return f"{self.repeats} repeat(s): none to hold out, no false-positive rate measurable"
        # only the repeat-level rate gets an interval: the requests are the same prompts under one shared limit,
        # no independent trials
        return (f"held out: {self.failed_repeats}/{self.repeats} repeats fail the others' limits or floor "
                f"(95 % CI {percent(self.repeat_interval)}; {self.requests_over} of {self.requests} requests over "
                "them)")

    @property
    def sentence(self) -> str:
        return self.short + ("; " + "; ".join(self.failures) if self.failures else "")


# the fixed-limit part of one request's verdict (refcheck/judging/compare.py failure_line), passed in by the caller
OverLimits = Callable[[RequestComparison, Limits], bool]


def false_positives(repeats: Sequence[Sequence[RequestComparison]], least_limit: float, least_tie_gap: float,
                    over_limits: OverLimits, family: Family | None = None) -> FalsePositives:
    """Bit-identical repeats: "deterministic over K repeats". Otherwise each repeat judged, as a later run would be,
    by the limits and floor of the others (held out), with exact 95 % intervals."""
    if bit_identical(repeats):
        return FalsePositives(len(repeats), True, 0, sum(map(len, repeats)), 0, None, None, [])
    failures, over = [], 0
    for k, mine in enumerate(repeats):
        others = [r for j, r in enumerate(repeats) if j != k]
        if not others:
            break
        limits = derive_limits(spread(others), least_limit, least_tie_gap, family)
        bad = [c.request for c in mine if over_limits(c, limits)]
        over += len(bad)
        # judged as a later run is (harness/refcheck/judging/check.py): run-level where the others can measure it
        budget = held_out_budget(spread(others), family)
        floor = judge_floor_pairing(mine, mean_floor(others), f"the other {len(others)} repeat(s)",
                                    held_out_shifts(others) if len(others) >= MIN_RUN_SHIFTS else None, budget)
        why = ([f"{len(bad)} request(s) over the limits ({', '.join(bad[:3])})"] if bad else []) + (
            [] if floor.passed else [floor.sentence])
        if why:
            failures.append(f"repeat {k + 1}: " + "; ".join(why))
    n = sum(map(len, repeats)) if len(repeats) > 1 else 0
    held_out = len(repeats) if len(repeats) > 1 else 0
    return FalsePositives(len(repeats), False, len(failures), n, over,
                          clopper_pearson(len(failures), held_out) if held_out else None,
                          clopper_pearson(over, n) if n else None, failures)


def held_out_shifts(repeats: Sequence[Sequence[RequestComparison]]) -> list[float]:
    """Each repeat's run-level shift against the mean floor of the others: what the run-level floor test judges later
    runs by. Empty with fewer than two repeats."""
    out = []
    for k, mine in enumerate(repeats):
        others = [r for j, r in enumerate(repeats) if j != k]
        shift = mean_shift(mine, mean_floor(others)) if others else None
        if shift is not None:
            out.append(float(f"{shift:.7g}"))
    return out


def held_out_budget(s: Spread, family: Family | None) -> RunBudget:
    """The budget a held-out repeat is judged at, as a later run would be by what the others store."""
    moved = max((abs(d) for d in run_to_run_deviations(s.request_drifts)), default=0.0)
    unit = rounding_unit(s.drift_p50, moved)
    return RunBudget(family if family is not None else unstated_budget().family, unit)
