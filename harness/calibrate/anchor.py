"""The independent anchor of an arm's first calibration (pure): judged by numbers the build under test did not make.

An arm's first calibration has no calibration before it to judge its repeats, and gates.yaml's seed limits fail every
clean bf16 repeat, so without an anchor only a person could vouch for it. Two anchors:

- **float32 teacher forcing** (generated tiny models): the reference's greedy continuations scored by transformers in
  float32 (harness/tinymodel/teacher_score.py). Each arm's distance to float32 is the mean |logprob - float32 logprob|
  over every teacher-forced position, both arms on the same tokens. A faithful build of the same dtype lands about as
  far from float32 as the reference does; a wrong computation lands farther. The candidate's mean distance may exceed
  the reference's by at most max(ratio x the reference's, floor) nats plus a sampling term (Fp32Bound, judge_fp32;
  the numbers and their derivation: docs/gates.md "Calibration", FP32_BOUND below), pooled and on each request alone
  (a fault past a length touches a few long requests and hides in the pooled mean).
- **the reference's own equivalence noise**: the reference arm against its own stored outputs under perturbations
  that agree in exact arithmetic (another batch composition and arrival order, compiled vs eager). The candidate's mean
  per-position drift may be at most max(factor x the reference's, the reference's + floor) (SpreadBound).

A repeat over a bound refuses the calibration, naming the anchor, the repeats, the measured value and the bound.
Where neither anchor can be measured (a real model: no float32 pass; no self-noise stored) the outcome says so, and
the first calibration falls back to gates.yaml's limits and `--trust`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from scipy.stats import t as student_t

from harness.judge.fp32_anchor import (  # noqa: F401 (re-exported)
    FP32_BOUND,
    Distance,
    Fp32Bound,
    RequestExcess,
    fp32_distance,
)
from harness.records.schema import RequestComparison

# A clean first calibration is refused with probability at most ALPHA by the sampling term (over its K repeats).
ALPHA = 0.01


@dataclass(frozen=True)
class SpreadBound:
    """The candidate's mean per-position drift may be at most max(factor x the reference's own equivalence noise, that
    noise + floor)."""

    factor: float
    floor: float
    source: str


# Measured on one H200 (stored evidence): the DCP candidate against its reference drifts 1.00x (p50) and 0.98x (p99)
# as far as the candidate's CUDA graphs against its own eager; 4 admits a candidate rounding up to 5.6x as coarsely as
# its reference (docs/gates.md derives it). The floor is float32 resolution (harness/judge/fp32_anchor.py).
SPREAD_BOUND = SpreadBound(factor=4.0, floor=2e-5, source="H200 graphs-vs-eager ratio 1.00 and a rounding model: "
                           "docs/gates.md")


@dataclass(frozen=True)
class AnchorVerdict:
    """One anchor's judgement of the first calibration's repeats: `measured` False where the anchor has no input (the
    sentence says why), then `passed` is False and says nothing of the build."""

    anchor: str
    measured: bool
    passed: bool
    sentence: str
    failing: tuple[int, ...] = ()  # the repeats over the bound (1-based)


def judge_fp32(distances: Sequence[Distance | str], bound: Fp32Bound = FP32_BOUND,
               alpha: float = ALPHA) -> AnchorVerdict:
    """Every repeat's excess distance to float32 within the bound: max(ratio x the reference's distance, floor) for
    what legitimate executions differ by, plus the one-sided (1 - alpha / K) normal quantile of its standard error for
    which positions the prompts happened to hold."""
    name = "float32 teacher forcing"
    missing = [d for d in distances if isinstance(d, str)]
    if missing or not distances:
        return AnchorVerdict(name, False, False, f"{name}: not measured ({missing[0] if missing else 'no repeat'})")
    # One budget for both tests: half to the pooled mean (over the K repeats), half to the per-request test (over
    # every request of every repeat, Student t on its positions: heavy-tailed rounding)
    z = NormalDist().inv_cdf(1 - alpha / 2 / len(distances))
    per_request = [(d.repeat, e) for d in distances for e in d.requests]

    def allowed(d: Distance) -> float:
        return bound.excess_allowed(d.reference) + z * d.standard_error

    def t_limit(e: RequestExcess) -> float:
        return float(student_t.ppf(1 - alpha / 2 / len(per_request), e.positions - 1))

    pooled_over = {d.repeat for d in distances if d.excess > allowed(d)}
    request_over = {k for k, e in per_request if e.t(bound) > t_limit(e)}
    worst = max(distances, key=lambda d: d.excess - allowed(d))
    said = (f"the candidate's mean |logprob - float32| {worst.candidate:.3g} against the reference's "
            f"{worst.reference:.3g} over {worst.positions} positions (repeat {worst.repeat}): excess "
            f"{worst.excess:.3g}, bound {allowed(worst):.3g} = max({bound.ratio:g} x {worst.reference:.3g}, "
            f"{bound.floor:g}) + {z:.2f} x standard error {worst.standard_error:.2g} ({bound.source})")
    if per_request:  # a fault on a few (long) requests is diluted in the pooled mean: each request alone
        k, far = max(per_request, key=lambda ke: ke[1].t(bound) - t_limit(ke[1]))
        said += f"; per request, the farthest (repeat {k}): {far.sentence(bound, t_limit(far))}"
    over = sorted(pooled_over | request_over)
    if over:
        which = ", ".join(str(k) for k in over)
        lead = "" if pooled_over else "per request: "
        return AnchorVerdict(name, True, False, f"{name} in repeat{'s' if len(over) > 1 else ''} {which}: {lead}"
                             f"{said}", tuple(over))
    return AnchorVerdict(name, True, True, f"{name}: {said}")


def mean_drift(comparisons: Sequence[RequestComparison]) -> tuple[float, int]:
    """Mean |delta| over every compared position of a check (deltas before each first divergence), and their count."""
    values = [d for c in comparisons for d in c.deltas if d is not None]
    return (sum(values) / len(values) if values else 0.0), len(values)


def judge_spread(check: str, repeats: Sequence[Sequence[RequestComparison]],
                 self_noise: Sequence[Sequence[RequestComparison]], bound: SpreadBound = SPREAD_BOUND) -> AnchorVerdict:
    """Every repeat's mean drift within the bound of the reference's own equivalence noise on the same check (its
    largest over the perturbations measured)."""
    name = f"{check} against the reference's own equivalence noise"
    if not self_noise:
        return AnchorVerdict(name, False, False, f"{name}: not measured (no self-noise of the reference stored)")
    noise = max(mean_drift(s)[0] for s in self_noise)
    allowed = max(bound.factor * noise, noise + bound.floor)
    levels = [(k, *mean_drift(r)) for k, r in enumerate(repeats, 1)]
    over = [k for k, level, _ in levels if level > allowed]
    k, level, n = max(levels, key=lambda x: x[1])
    said = (f"mean drift {level:.3g} over {n} positions (repeat {k}) against the reference's {noise:.3g} under "
            f"{len(self_noise)} perturbation(s), bound {allowed:.3g} = max({bound.factor:g} x {noise:.3g}, "
            f"{noise:.3g} + {bound.floor:g}; {bound.source})")
    if over:
        return AnchorVerdict(name, True, False, f"{name} in repeat{'s' if len(over) > 1 else ''} "
                             f"{', '.join(map(str, over))}: {said}", tuple(over))
    return AnchorVerdict(name, True, True, f"{name}: {said}")


@dataclass(frozen=True)
class FirstCalibrationAnchor:
    """What judged an arm's first calibration: `measured` False (no anchor could be measured: gates.yaml and --trust
    judge it, as before) or the anchors' verdicts, `passed` when every measured one passed."""

    verdicts: tuple[AnchorVerdict, ...]

    @property
    def measured(self) -> bool:
        return any(v.measured for v in self.verdicts)

    @property
    def passed(self) -> bool:
        return self.measured and all(v.passed for v in self.verdicts if v.measured)

    @property
    def sentence(self) -> str:
        if not self.measured:
            why = "; ".join(v.sentence for v in self.verdicts) or "no anchor applies"
            return (f"no independent anchor could be measured ({why}): the first calibration is judged by gates.yaml's "
                    "limits, and a failure there takes --trust")
        shown = [v for v in self.verdicts if v.measured and not v.passed] or [v for v in self.verdicts if v.measured]
        return "; ".join(v.sentence for v in shown)
