"""One error budget per run (pure): a calibrated check's share of the run's 1 % (Bonferroni over the run's checks),
the bound's shape factor (wide enough for lognormal run-level shifts), and the rounding unit every bound keeps.
Why and measured rates: docs/gates.md, "One error budget per run".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

RUN_BUDGET = 0.01  # a clean run fails some calibrated check this often, at most
POWER = 0.8  # the stated power: the smallest shift caught this often
# float32's step at the tiny models' logits scale: the least move of a logprob a rounding change makes (docs/gates.md)
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
    """u = max(FLOAT32_LOGPROB_STEP, p50 - moved): the clean median |delta| is what another rounding moves a logprob
    by, less what the repeats already realized (derivation: docs/gates.md, "Rounding unit")."""
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


# The parts of a check's share sum to it (union bound). Half to the floor test (its shape factor is steep in alpha),
# the rest to the tail-derived limits and the tie-flip cap; the float32 anchor takes half of the floor test's half.
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
    """c with P(x_new > mean_K + c s_K sqrt(1 + 1/K)) = alpha for lognormal run-level shifts: the exact exceedance
    averaged over SHAPE_DRAWS seeded K-samples (Rao-Blackwell), c by bisection."""
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
