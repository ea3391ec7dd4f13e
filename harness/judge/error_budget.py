"""One error budget per run (pure): how a calibrated check's run-level floor test spends its share of the run's 1 %,
how wide its bound must be where K clean repeats cannot show the noise's shape, and the least width a legitimate
rounding change needs. The derivations and the measured rates: docs/gates.md "One error budget per run".

- **Family**: a run's calibrated checks are one family; each is judged at RUN_BUDGET / m (Bonferroni). The union
  bound holds under any dependence between the checks (they share the run's noise), needs no joint model of K = 5
  repeats, and lets each check be judged alone, in its own test (Holm would need every p-value of the run at once).
- **Shape factor**: the bound's multiplier holds the rate for the most skewed shape the harness is held to (run-level
  shifts lognormal, sigma 1: Gaussian and Student t3 need less at every K and alpha), not for Gaussian noise alone.
- **Rounding unit**: what a build that only rounds differently can move a check's drift by, added to every bound and
  limit, so bit-identical repeats never give a zero-width one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

RUN_BUDGET = 0.01  # a clean run fails some calibrated check this often, at most
POWER = 0.8  # the stated power: the smallest shift caught this often
# vLLM's logprobs are float32, a difference of values at the logits' scale ([16, 32) in the tiny models: a float32
# step of 2^-19 there): a build that rounds otherwise moves a logprob by at least this where it moves it at all.
FLOAT32_LOGPROB_STEP = 2.0 ** -19
SHAPE_SIGMA = 1.0  # the lognormal run-level shift the shape factor is derived for
SHAPE_DRAWS = 20_000  # seeded K-samples the shape factor averages its exact exceedance over
SHAPE_SEED = 55


@dataclass(frozen=True)
class Family:
    """The calibrated checks a run judges (m) and where that count came from."""

    size: int
    source: str

    @property
    def alpha(self) -> float:
        return RUN_BUDGET / max(self.size, 1)

    @property
    def text(self) -> str:
        return (f"alpha {RUN_BUDGET:g}/{self.size} per check, {RUN_BUDGET * 100:g} % per run (m = {self.size}: "
                f"{self.source})")


def unstated_family(catalogue: int) -> Family:
    """A check not told its run's family: the catalogue's every calibratable check (the most a run can judge), never
    a silent 1 % per check."""
    return Family(catalogue, f"not given; the catalogue's {catalogue} calibratable checks assumed")


@dataclass(frozen=True)
class RoundingUnit:
    """The least width of a drift bound: what a legitimate rounding change moves the drift by."""

    value: float
    derivation: str


def rounding_unit(clean_p50: float | None, repeats_moved: float | None) -> RoundingUnit:
    """u = max(FLOAT32_LOGPROB_STEP, p50 - moved). The candidate and its reference compute the same math in other
    reduction orders, so the clean median per-position |delta| (p50) is what another rounding moves a logprob by. By
    the triangle inequality ||d + e| - |d|| <= |e|, a build moving each logprob by at most e moves a run's mean |delta|
    and a request's max |delta| by at most e. Where the repeats already realized such moves (the largest per-request
    move between them, `moved`; below FLOAT32_LOGPROB_STEP none), the clean spread carries it; what they did not
    realize is added. Bounded by the
    ceiling on p50 (calibration.max_drift_p50, half a logit step) that a calibration passed."""
    p50 = clean_p50 or 0.0
    moved = repeats_moved if (repeats_moved or 0.0) >= FLOAT32_LOGPROB_STEP else 0.0  # below: the mean's arithmetic
    value = max(FLOAT32_LOGPROB_STEP, p50 - moved)
    if value == FLOAT32_LOGPROB_STEP:
        why = f"float32's logprob step 2^-19 (clean median |delta| {p50:.2g}, realized by repeats moving {moved:.2g})"
    else:
        why = f"the clean median |delta| {p50:.2g} less the repeats' largest move {moved:.2g}"
    return RoundingUnit(value, why)


def unit_of(spread: Mapping | None) -> RoundingUnit:
    """The rounding unit of a stored calibration's spread (drift_p50, run_to_run_move_max); one stored without them:
    float32's step."""
    spread = spread or {}
    return rounding_unit(spread.get("drift_p50"), spread.get("run_to_run_move_max"))


# What a calibrated check spends its share of the run's budget on: each part can fail a clean run, so the parts' levels
# sum to the share (the union bound over the parts and the checks keeps the run's 1 %). Half goes to the floor test
# (its shape factor is steep in alpha: the power is the floor test's), the rest equally to the limits derived at
# calibration (drift limit, tie gap: an exponential tail, logarithmic in alpha) and the tie-flip cap judged in the
# run. Teacher forcing of a generated model adds the float32 anchor, which takes half of the floor test's half
# (harness/judge/fp32_anchor.py).
FLOOR_PART, ANCHOR_PART = "floor test", "float32 anchor"
LIMIT_PARTS = ("drift limit", "tie gap", "tie-flip cap")


def part_weights(anchored: bool) -> dict[str, float]:
    tested = {FLOOR_PART: 0.25, ANCHOR_PART: 0.25} if anchored else {FLOOR_PART: 0.5}
    return {**tested, **{p: 0.5 / len(LIMIT_PARTS) for p in LIMIT_PARTS}}


def part_alpha(family: Family, part: str, anchored: bool = False) -> float:
    """The level `part` of one check is judged or derived at."""
    return family.alpha * part_weights(anchored)[part]


@dataclass(frozen=True)
class RunBudget:
    """What one check's tests spend (their parts of its share) and the least width its floor test keeps."""

    family: Family
    unit: RoundingUnit = RoundingUnit(FLOAT32_LOGPROB_STEP, "float32's logprob step 2^-19")
    anchored: bool = False  # the check also judges the float32 anchor

    @property
    def alpha(self) -> float:
        """The floor test's level."""
        return self.part(FLOOR_PART)

    def part(self, name: str) -> float:
        return part_alpha(self.family, name, self.anchored)

    @property
    def text(self) -> str:
        parts = ", ".join(f"{name} {self.part(name):.2g}" for name in part_weights(self.anchored))
        return f"{self.family.text}; its parts: {parts}"


def _normal_sf(z: np.ndarray) -> np.ndarray:
    try:
        from scipy.special import ndtr
    except ImportError:  # the device image may lack scipy
        return 0.5 * np.vectorize(math.erfc)(z / math.sqrt(2))
    return ndtr(-z)


@lru_cache(maxsize=64)
def shape_factor(k: int, alpha: float) -> float:
    """c with P(x_new > mean_K + c s_K sqrt(1 + 1/K)) = alpha for lognormal (sigma SHAPE_SIGMA) run-level shifts: for
    each of SHAPE_DRAWS seeded K-samples the exact exceedance of the next draw, averaged (Rao-Blackwell: no tail
    counting), c by bisection. Exact Student t where the shifts are Gaussian is below it at every K and alpha."""
    rng = np.random.default_rng(SHAPE_SEED)
    x = rng.lognormal(0.0, SHAPE_SIGMA, (SHAPE_DRAWS, k))
    mean, scale = x.mean(axis=1), x.std(axis=1, ddof=1) * math.sqrt(1 + 1 / k)

    def rate(c: float) -> float:
        return float(_normal_sf(np.log(mean + c * scale) / SHAPE_SIGMA).mean())

    low, high = 0.0, 1.0
    while rate(high) > alpha:
        low, high = high, high * 2
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if rate(mid) > alpha else (low, mid)
    return high
