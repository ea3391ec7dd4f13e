"""Drift judged against a noise floor for the same arm pair (pure).

A fixed drift limit only sees faults larger than one request's kernel noise; paired over the same prompts against a
known-good run's drift, a small shift is plain (docs/gates.md, "Derivation, bounded"). One-sided paired tests, or a
run-level test where a calibration measured enough held-out shifts; too few pairs is FAIL, never PASS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from harness.config.thresholds import DRIFT_CHECKS
from harness.judge.error_budget import POWER as POWER_STATED
from harness.judge.error_budget import RUN_BUDGET, RunBudget, shape_factor, unstated_family
from harness.records.schema import RequestComparison

ALPHA = 0.01  # one-sided: a false alarm on a good build one run in a hundred
POWER = 0.9  # for the minimum detectable shift
MIN_PAIRS = 10
# Asymptotic relative efficiency of the signed-rank test vs the paired t-test under normal noise: 3/pi.
WILCOXON_ARE = 3 / math.pi


@dataclass(frozen=True)
class PairedVerdict:
    passed: bool
    statistic: str  # which test, on which measure
    pairs: int
    p_value: float | None
    median_shift: float | None  # median of (candidate - floor) over the pairs
    mean_shift: float | None
    floor_source: str
    sentence: str  # the line a report or an assertion quotes


def pair_up(candidate: Mapping[str, float | None], floor: Mapping[str, float | None]) -> list[tuple[float, float]]:
    """(candidate, floor) for every key both sides measured with a finite value, in key order."""
    out = []
    for key in sorted(candidate.keys() & floor.keys()):
        c, f = candidate[key], floor[key]
        if c is not None and f is not None and math.isfinite(c) and math.isfinite(f):
            out.append((c, f))
    return out


def paired_drift_test(candidate: Mapping[str, float | None], floor: Mapping[str, float | None], floor_source: str,
                      measure: str = "per-request max |delta logprob|", method: str = "wilcoxon",
                      alpha: float = ALPHA, min_pairs: int = MIN_PAIRS) -> PairedVerdict:
    """One-sided paired test that the candidate drifts more than the floor on the same keys (request ids, or
    request/position ids). method: "wilcoxon" (signed-rank, zeros kept in the ranking: Pratt) or "sign" (exact
    binomial on the non-zero differences)."""
    pairs = pair_up(candidate, floor)
    name = ("Wilcoxon signed-rank" if method == "wilcoxon" else "sign test") + f" on {measure}"
    n = len(pairs)
    if n < min_pairs:
        return PairedVerdict(False, name, n, None, None, None, floor_source,
                             f"FAIL: not enough data for the {name}: {n} paired value(s) (< {min_pairs}) against "
                             f"{floor_source}; the drift shift cannot be judged")
    diffs = [c - f for c, f in pairs]
    median = float(sorted(diffs)[n // 2] if n % 2 else (sorted(diffs)[n // 2 - 1] + sorted(diffs)[n // 2]) / 2)
    mean = sum(diffs) / n
    nonzero = [d for d in diffs if d != 0]
    if not nonzero:
        p = 1.0
    elif method == "sign":
        p = sign_test_greater(sum(d > 0 for d in nonzero), len(nonzero))
    else:
        p = wilcoxon_greater(diffs)
    passed = p >= alpha
    verdict = "PASS" if passed else "FAIL"
    sentence = (f"{verdict}: {name} vs {floor_source}: {n} pairs, median shift {median:+.3g}, mean shift "
                f"{mean:+.3g}, one-sided p = {p:.2g} ({'>=' if passed else '<'} alpha {alpha:g})")
    return PairedVerdict(passed, name, n, p, median, mean, floor_source, sentence)


def sign_test_greater(ups: int, n: int) -> float:
    """Exact one-sided binomial p-value P(X >= ups), X ~ Bin(n, 1/2) (scipy.stats.binomtest where installed)."""
    try:
        from scipy import stats
    except ImportError:  # the device image may lack scipy: exact integer arithmetic
        return sum(math.comb(n, k) for k in range(ups, n + 1)) / 2 ** n
    return float(stats.binomtest(ups, n, 0.5, alternative="greater").pvalue)


def wilcoxon_greater(diffs: Sequence[float]) -> float:
    """One-sided Wilcoxon signed-rank p-value (zeros ranked, then dropped: Pratt) that the differences sit above 0.
    scipy.stats.wilcoxon where installed, else its normal approximation with the tie correction."""
    try:
        from scipy import stats
    except ImportError:
        return _wilcoxon_pratt_normal(diffs)
    return float(stats.wilcoxon(diffs, zero_method="pratt", alternative="greater").pvalue)


def _wilcoxon_pratt_normal(diffs: Sequence[float]) -> float:
    order = sorted(range(len(diffs)), key=lambda i: abs(diffs[i]))
    ranks = [0.0] * len(diffs)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and abs(diffs[order[j + 1]]) == abs(diffs[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    n, n0 = len(diffs), sum(d == 0 for d in diffs)
    r_plus = sum(r for r, d in zip(ranks, diffs, strict=True) if d > 0)
    mean = (n * (n + 1) - n0 * (n0 + 1)) / 4
    var = (n * (n + 1) * (2 * n + 1) - n0 * (n0 + 1) * (2 * n0 + 1)) / 24 - sum(t ** 3 - t for t in ties) / 48
    if var <= 0:
        return 1.0
    return 1 - NormalDist().cdf((r_plus - mean) / math.sqrt(var))


def minimum_detectable_shift(paired_sd: float, pairs: int, alpha: float = ALPHA, power: float = POWER,
                             method: str = "wilcoxon", resolution: float = 0.0) -> float | None:
    """The smallest mean shift the paired test detects: (z_{1-alpha} + z_power) sd / sqrt(n) / sqrt(ARE), never below
    `resolution` (a bit-identical repeat); None when pairs < 2."""
    if pairs < 2:
        return None
    z = NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)
    shift = z * paired_sd / math.sqrt(pairs)
    if method == "wilcoxon":
        shift /= math.sqrt(WILCOXON_ARE)
    return max(shift, resolution)


def paired_sd(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> tuple[float, int]:
    """Sample standard deviation of the paired differences of two known-good runs, and the pair count."""
    pairs = pair_up(a, b)
    if len(pairs) < 2:
        return math.nan, len(pairs)
    diffs = [x - y for x, y in pairs]
    mean = sum(diffs) / len(diffs)
    return math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)), len(pairs)


def smallest_detectable_offset(shift: float | None, calibration: Sequence[tuple[float, float]]) -> float | None:
    """The smallest planted fault size whose measured drift shift reaches `shift`, interpolated in log offset over
    the mutation benchmark's [(offset, shift)]; None beyond the largest or without any."""
    points = sorted((o, s) for o, s in calibration if o > 0)
    if shift is None or not points:
        return None
    if points[0][1] >= shift:
        return points[0][0]
    for (o1, s1), (o2, s2) in zip(points, points[1:], strict=False):
        if s1 < shift <= s2:
            t = (shift - s1) / (s2 - s1)
            return math.exp(math.log(o1) + t * (math.log(o2) - math.log(o1)))
    return None


def detection_sentence(shift: float | None, pairs: int, floor_source: str, measure: str,
                       offset: float | None = None, offset_name: str = "LSE offset on one DCP rank",
                       alpha: float = ALPHA) -> str:
    """What the report states: the smallest fault this run could have detected."""
    if shift is None:
        return f"smallest detectable shift unknown: fewer than 2 pairs against {floor_source}"
    text = (f"smallest detectable mean shift of {measure}: {shift:.3g} ({pairs} pairs against {floor_source}, "
            f"alpha {alpha:g}, power {POWER:g})")
    if offset is not None:
        text += f"; by the mutation benchmark's calibration, an {offset_name} of {offset:.2g} or more"
    return text


def per_request(comparisons: Sequence[RequestComparison], field: str = "max_drift") -> dict[str, float | None]:
    """{request id: value} for the paired floor test (max_drift, or mean_drift of teacher-forced lines)."""
    return {c.request: getattr(c, field, None) for c in comparisons}


def pair_key(c: RequestComparison) -> str:
    """What pairs a comparison with the floor's: its request within its group (a check may compare one request twice,
    as long_prefix_outputs does: its free generation, group "c1", and its teacher-forced score, "c1 forced")."""
    return f"{c.group}|{c.request}" if c.group else c.request


def per_position(comparisons: Sequence[RequestComparison]) -> dict[str, float | None]:
    """{"request/position": |delta|} over every scored position of every request."""
    return {f"{pair_key(c)}/{i}": d for c in comparisons for i, d in enumerate(c.deltas)}


@dataclass(frozen=True)
class FloorJudgement:
    passed: bool
    sentence: str  # the paired tests' verdict, quoted by the record and the report
    detectable: str  # the smallest shift this run could have detected against the floor


def common_means(candidate: Sequence[RequestComparison], floor: Sequence[RequestComparison]
                 ) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Per-request mean |delta| over the positions both runs scored (a generation check stops at its first
    divergence, which may differ between the runs): equal footing for the paired test."""
    mine, theirs = {pair_key(c): c.deltas for c in candidate}, {pair_key(c): c.deltas for c in floor}
    a, b = {}, {}
    for key in mine.keys() & theirs.keys():
        pairs = [(x, y) for x, y in zip(mine[key], theirs[key], strict=False) if x is not None and y is not None]
        if pairs:
            a[key] = sum(x for x, _ in pairs) / len(pairs)
            b[key] = sum(y for _, y in pairs) / len(pairs)
    return a, b


def judge_against_floor(candidate: Sequence[RequestComparison], floor: Sequence[RequestComparison],
                        floor_source: str, alpha: float = ALPHA) -> FloorJudgement:
    """The candidate's per-position drift against a known-good run's on the same requests: a Wilcoxon test on the
    per-request mean |delta| and a sign test per position, each at alpha/2; a check with too few requests rests on the
    per-position test, with neither enough pairs it fails (no data)."""
    half = alpha / 2
    mine, theirs = common_means(candidate, floor)
    positions, floor_positions = per_position(candidate), per_position(floor)
    by_request = paired_drift_test(mine, theirs, floor_source, measure="per-request mean |delta|", alpha=half)
    by_position = paired_drift_test(positions, floor_positions, floor_source, measure="per-position |delta|",
                                    method="sign", alpha=half)
    judged = [v for v in (by_request, by_position) if v.p_value is not None]
    if not judged:
        return FloorJudgement(False, f"{by_request.sentence}; {by_position.sentence}",
                              "no shift detectable: too few paired values against the floor")
    sentences = [v.sentence if v.p_value is not None else _not_judged(v) for v in (by_request, by_position)]
    if by_request.p_value is not None:
        sd, n = paired_sd(mine, theirs)
        measure = "per-request mean |delta|"
    else:
        sd, n = paired_sd(positions, floor_positions)
        measure = "per-position |delta|"
    shift = minimum_detectable_shift(sd, n, alpha=half, resolution=1e-6) if sd == sd else None
    detectable = detection_sentence(shift, n, floor_source, measure, alpha=half)
    return FloorJudgement(all(v.passed for v in judged), "; ".join(sentences), detectable)


def _not_judged(verdict: PairedVerdict) -> str:
    return (f"not judged: the {verdict.statistic} has {verdict.pairs} paired value(s) (< {MIN_PAIRS}); "
            "the verdict rests on the other test")


# The run-level test: noise shared by a run's requests makes them no independent pairs, so the paired tests fail
# clean runs; with K >= MIN_RUN_SHIFTS repeats the run is judged as one unit, its mean shift against the held-out
# shifts (docs/gates.md, "Derivation, bounded").
MIN_RUN_SHIFTS = 3


def mean_shift(candidate: Sequence[RequestComparison], floor: Sequence[RequestComparison]) -> float | None:
    """The run's mean over requests of its per-request mean |delta| minus the floor's (positions both scored)."""
    mine, theirs = common_means(candidate, floor)
    keys = sorted(k for k in mine.keys() & theirs.keys() if mine[k] is not None and theirs[k] is not None)
    if not keys:
        return None
    return sum(mine[k] - theirs[k] for k in keys) / len(keys)


def unstated_budget() -> RunBudget:
    """The budget of a caller that cannot name its run's family: every calibratable check of the catalogue."""
    return RunBudget(unstated_family(len(DRIFT_CHECKS)))


def run_level_bound(clean_shifts: Sequence[float], budget: RunBudget | None = None) -> tuple[float, float, float]:
    """(bound, mean, sd) of the clean held-out shifts: one more clean run stays under `bound` with probability
    >= 1 - budget.alpha (error_budget.shape_factor), plus the rounding unit; the repeats' own sd is (K - 1) / K x the
    held-out shifts' sd."""
    budget = budget if budget is not None else unstated_budget()
    k = len(clean_shifts)
    mean = sum(clean_shifts) / k
    held_sd = math.sqrt(sum((s - mean) ** 2 for s in clean_shifts) / (k - 1))
    sd = held_sd * (k - 1) / k
    width = shape_factor(k, budget.alpha) * sd * math.sqrt(1 + 1 / k)
    return mean + width + budget.unit.value, mean, sd


def judge_run_level(candidate: Sequence[RequestComparison], floor: Sequence[RequestComparison], floor_source: str,
                    clean_shifts: Sequence[float], budget: RunBudget | None = None) -> FloorJudgement:
    """The run's mean shift against the floor, judged by the clean repeats' own held-out shifts (see MIN_RUN_SHIFTS)
    at the run's budget; FAIL (no data) when no request pairs with the floor."""
    budget = budget if budget is not None else unstated_budget()
    shift = mean_shift(candidate, floor)
    k = len(clean_shifts)
    if shift is None:
        return FloorJudgement(False, f"FAIL: not enough data for the run-level test: no request pairs with "
                              f"{floor_source}", "no shift detectable: nothing paired with the floor")
    bound, mean, sd = run_level_bound(clean_shifts, budget)
    passed = shift <= bound
    factor = shape_factor(k, budget.alpha)
    sentence = (f"{'PASS' if passed else 'FAIL'}: run-level shift of the mean |delta| vs {floor_source}: {shift:+.3g} "
                f"{'<=' if passed else '>'} bound {bound:+.3g} ({budget.text}; from the {k} clean repeats' "
                f"held-out shifts: run-to-run sd {sd:.3g} x {factor:.3g} (lognormal-safe, K = {k}) + rounding unit "
                f"{budget.unit.value:.2g}: {budget.unit.derivation})")
    caught = bound - mean + NormalDist().inv_cdf(POWER_STATED) * sd * math.sqrt(1 + 1 / k)
    detectable = (f"smallest mean shift caught at {POWER_STATED * 100:g} %: {caught:.3g} per check at alpha "
                  f"{RUN_BUDGET:g}/{budget.family.size} ({RUN_BUDGET * 100:g} % per run; its floor test at "
                  f"{budget.alpha:.2g}; the run's mean |delta| above the clean mean, {k} clean repeats)")
    return FloorJudgement(passed, sentence, detectable)


def judge_floor_pairing(candidate: Sequence[RequestComparison], floor: Sequence[RequestComparison], floor_source: str,
                        clean_shifts: Sequence[float] | None = None, budget: RunBudget | None = None) -> FloorJudgement:
    """The run-level test where a calibration measured MIN_RUN_SHIFTS or more held-out shifts, else the paired tests;
    `budget` None judges at the catalogue's every calibratable check, never at 1 % per check."""
    budget = budget if budget is not None else unstated_budget()
    if clean_shifts is not None and len(clean_shifts) >= MIN_RUN_SHIFTS:
        return judge_run_level(candidate, floor, floor_source, clean_shifts, budget)
    return judge_against_floor(candidate, floor, floor_source, budget.alpha)
