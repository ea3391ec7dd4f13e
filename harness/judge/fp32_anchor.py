"""The float32 anchor (pure): each arm's mean |logprob - float32 logprob| over the teacher-forced positions, judged
for a first calibration and in every run of a calibrated generated model. A faithful build lands about as far from
float32 as an equivalent execution; a wrong one farther. The run's excess may pass the calibrated one by the
FP32_BOUND allowance plus sampling (docs/gates.md, "The float32 anchor in every run").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

from harness.records.schema import TeacherForcedComparison

ANCHORED_CHECK = "teacher_forcing"  # every position of the reference's continuations, scored on the candidate
POWER = 0.8  # the stated power (as error_budget.POWER)


@dataclass(frozen=True)
class Fp32Bound:
    """The candidate's mean distance to float32 may exceed the reference's by at most max(ratio x the reference's
    distance, floor) nats."""

    ratio: float
    floor: float
    source: str  # where the numbers were measured (docs/gates.md)

    def excess_allowed(self, reference_distance: float) -> float:
        return max(self.ratio * reference_distance, self.floor)


# why: twice the measured spread of equivalent bf16 executions; the floor is float32 resolution (docs/gates.md,
# "The anchor of a first calibration")
FP32_RATIO_MEASURED = 0.06
FP32_BOUND = Fp32Bound(ratio=2 * FP32_RATIO_MEASURED, floor=2e-5,
                       source="bf16 controls of the tiny Llama (eager vs sdpa) and float32 rounding: docs/gates.md")


MIN_POSITIONS = 16  # a request with fewer scored positions has no usable spread of its own: pooled only


@dataclass(frozen=True)
class RequestExcess:
    """One request's mean excess |candidate - float32| - |reference - float32| over its positions, against the bound's
    allowance on the reference's own distance, in units of its standard error (positions as units). A fault that
    touches a few long requests hides in the pooled mean; here it stands alone."""

    request: str
    prompt_tokens: int
    positions: int
    excess: float
    reference: float
    standard_error: float

    def allowed(self, bound: Fp32Bound) -> float:
        return bound.excess_allowed(self.reference)

    def t(self, bound: Fp32Bound) -> float:
        over = self.excess - self.allowed(bound)
        return over / self.standard_error if self.standard_error > 0 else (math.inf if over > 0 else -math.inf)

    def sentence(self, bound: Fp32Bound, limit: float) -> str:
        return (f"request {self.request} ({self.prompt_tokens:,} prompt tokens, {self.positions} positions): excess "
                f"{self.excess:.3g} over the allowance {self.allowed(bound):.3g} = max({bound.ratio:g} x the "
                f"reference's {self.reference:.3g}, {bound.floor:g}) by {self.t(bound):.2f} standard errors "
                f"({self.standard_error:.2g}) against {limit:.2f}")


def distances_to_fp32(c: TeacherForcedComparison, reference: Sequence[float],
                      fp32: Sequence[float]) -> list[tuple[float, float]]:
    """(|candidate - float32|, |reference - float32|) at each finite position of one request (a non-finite candidate
    logprob is refused by the check itself)."""
    return [(abs(a - x), abs(b - x)) for a, b, x in zip(c.candidate_logprobs, reference, fp32, strict=True)
            if a is not None and all(math.isfinite(v) for v in (a, b, x))]


def request_excess_of(c: TeacherForcedComparison, pairs: Sequence[tuple[float, float]]) -> RequestExcess | None:
    """The request's RequestExcess from its distances_to_fp32; None below MIN_POSITIONS finite positions."""
    if len(pairs) < MIN_POSITIONS:
        return None
    d = [cand - ref for cand, ref in pairs]
    return RequestExcess(c.request, c.prompt_tokens, len(d), statistics.fmean(d),
                         statistics.fmean(ref for _, ref in pairs), statistics.stdev(d) / math.sqrt(len(d)))


@dataclass(frozen=True)
class Distance:
    """One run's mean |logprob - float32 logprob| of both arms over the same positions, the standard error of their
    difference (requests as the units: the positions of one request round together), and each request's own excess
    (RequestExcess, for the per-request test of a first calibration)."""

    repeat: int  # 1-based
    positions: int
    candidate: float
    reference: float
    standard_error: float
    requests: tuple[RequestExcess, ...] = ()

    @property
    def excess(self) -> float:
        return self.candidate - self.reference


def request_excess(pairs: Sequence[tuple[float, float]]) -> tuple[float, float, int]:
    """(sum of the candidate's distances, sum of the reference's, finite positions) of one request."""
    return sum(cand for cand, _ in pairs), sum(ref for _, ref in pairs), len(pairs)


def fp32_distance(repeat: int, comparisons: Sequence[TeacherForcedComparison],
                  reference: Mapping[str, Sequence[float]], fp32: Mapping[str, Sequence[float]]) -> Distance | str:
    """The run's distances to float32, or why they cannot be computed (a request without a float32 score or the
    reference's logprobs, a comparisons file without the candidate's logprobs)."""
    sums, requests = [], []
    for c in comparisons:
        if c.request not in fp32 or c.request not in reference:
            return f"request {c.request} of repeat {repeat} has no float32 score or reference logprobs"
        if len(c.candidate_logprobs) != c.reference_tokens:
            return (f"repeat {repeat}'s teacher_forcing comparisons carry no candidate logprobs for request "
                    f"{c.request} (a run of an older harness)")
        f, r = fp32[c.request], reference[c.request]
        if len(f) != c.reference_tokens or len(r) != c.reference_tokens:
            return (f"request {c.request}: {len(f)} float32 scores and {len(r)} reference logprobs for "
                    f"{c.reference_tokens} tokens")
        pairs = distances_to_fp32(c, r, f)
        sums.append(request_excess(pairs))
        own = request_excess_of(c, pairs)
        if own is not None:
            requests.append(own)
    distance = distance_of(repeat, sums)
    return distance if isinstance(distance, str) else replace(distance, requests=tuple(requests))


def distance_of(repeat: int, sums: Sequence[tuple[float, float, int]]) -> Distance | str:
    """The position-weighted mean distances of per-request (candidate sum, reference sum, positions), with the cluster
    (request) standard error of the mean excess."""
    n = sum(k for _, _, k in sums)
    if not n:
        return f"repeat {repeat} scored no finite position"
    cand, ref = sum(a for a, _, _ in sums) / n, sum(b for _, b, _ in sums) / n
    units = [(a - b, k) for a, b, k in sums if k]
    excess = cand - ref
    spread = sum((d - excess * k) ** 2 for d, k in units) / n ** 2
    se = math.sqrt(spread * len(units) / (len(units) - 1)) if len(units) > 1 else math.inf
    return Distance(repeat, n, cand, ref, se)


@dataclass(frozen=True)
class AnchorLevel:
    """What a calibration's clean repeats measured: each repeat's excess over the reference's distance and its own
    distance. Stored in the calibration's spread (`fp32`), so every run of the arm is judged by it."""

    excesses: tuple[float, ...]
    distances: tuple[float, ...]

    @property
    def level(self) -> float:
        """The clean build's excess (never below 0: closer to float32 than the reference is no credit)."""
        return max(0.0, statistics.fmean(self.excesses))

    @property
    def distance(self) -> float:
        return statistics.fmean(self.distances)

    def fields(self) -> dict:
        return {"excess": [float(f"{e:.7g}") for e in self.excesses],
                "distance": [float(f"{d:.7g}") for d in self.distances]}


def level_of(distances: Sequence[Distance]) -> AnchorLevel:
    return AnchorLevel(tuple(d.excess for d in distances), tuple(d.candidate for d in distances))


def stored_level(spread: Mapping | None) -> AnchorLevel | None:
    """The level a calibration stored (None: none, e.g. a real model, or a calibration made before it was)."""
    fp32 = (spread or {}).get("fp32")
    if not fp32 or not fp32.get("excess"):
        return None
    return AnchorLevel(tuple(fp32["excess"]), tuple(fp32["distance"]))


def allowance(level: AnchorLevel, reference_distance: float, bound: Fp32Bound = FP32_BOUND) -> float:
    """How far above the calibrated excess a legitimate build may land: max(ratio x the larger of the reference's and
    the calibrated build's distance, floor)."""
    return bound.excess_allowed(max(reference_distance, level.distance))


def run_anchor_limit(d: Distance, level: AnchorLevel, alpha: float, bound: Fp32Bound = FP32_BOUND) -> float:
    """The largest excess a clean run shows with probability >= 1 - alpha (sampling), and a legitimate build too."""
    return level.level + allowance(level, d.reference, bound) + NormalDist().inv_cdf(1 - alpha) * d.standard_error


def caught_shift(d: Distance, level: AnchorLevel, alpha: float, bound: Fp32Bound = FP32_BOUND,
                 power: float = POWER) -> float:
    """The smallest rise of the excess over the calibrated one that fails the run with probability `power`."""
    z = NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)
    return allowance(level, d.reference, bound) + z * d.standard_error


@dataclass(frozen=True)
class RunAnchor:
    passed: bool
    sentence: str
    detectable: str


def judge_run_anchor(distance: Distance | str, level: AnchorLevel, alpha: float, share: str,
                     bound: Fp32Bound = FP32_BOUND) -> RunAnchor:
    """The run's excess distance to float32 against its calibration's; no distance fails (no data). `share`: the
    budget's words for alpha."""
    name = "float32 anchor"
    if isinstance(distance, str):
        failure = f"FAIL (no data: {name}: {distance})"
        return RunAnchor(False, failure, "none: no distance to float32")
    limit = run_anchor_limit(distance, level, alpha, bound)
    passed = distance.excess <= limit
    z = NormalDist().inv_cdf(1 - alpha)
    sentence = (f"{name} {'passes' if passed else 'FAILS'}: the run's mean |logprob - float32| "
                f"{distance.candidate:.3g} against the reference's {distance.reference:.3g} over "
                f"{distance.positions} positions: excess {distance.excess:+.3g} {'<=' if passed else '>'} {limit:+.3g} "
                f"= the calibration's clean excess "
                f"{level.level:.3g} (mean of {len(level.excesses)}) + max({bound.ratio:g} x "
                f"{max(distance.reference, level.distance):.3g}, {bound.floor:g}) + {z:.2f} x standard error "
                f"{distance.standard_error:.2g} ({share})")
    detectable = (f"float32 anchor: smallest rise of the excess caught at {POWER * 100:g} %: "
                  f"{caught_shift(distance, level, alpha, bound):.3g} ({share})")
    return RunAnchor(passed, sentence, detectable)
