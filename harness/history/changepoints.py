"""Change points in one metric's nightly series (pure): where its level moved, by how much, and how surely.

ruptures' binary segmentation proposes cuts on the noise-scaled series; Otava's merge step keeps those a Welch t-test
holds (p < `max_p`). Positive series are judged in logs (a step is a ratio). Why ruptures: docs/history.md
("Change points").
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy import stats

MAX_P = 0.001  # per kept change point; 20 clean runs give none in >= 99 % of series (docs/history.md)
MIN_SIZE = 2  # runs on each side: one slow night is an outlier, two in a row a level (PyTorch HUD's rule too)
PENALTY = 2.0  # ruptures' penalty per change point, x log(n), on the noise-scaled series (BIC's 2 log n)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # position in the series of the first run at the new level
    before: float  # mean of the runs since the previous change point (geometric on the log scale)
    after: float  # mean of the runs up to the next one
    p_value: float

    @property
    def relative(self) -> float | None:
        return relative_change(self.before, self.after)

    def size(self) -> str:
        return change_text(self.before, self.after)


def relative_change(before: float, after: float) -> float | None:
    """after / before - 1 (None when the level before is 0)."""
    return after / before - 1 if before else None


def change_text(before: float, after: float) -> str:
    """'4.1 -> 4.6 (+12.2%)': a level change as the history prints it (change points and the nightly gate)."""
    rel = relative_change(before, after)
    return f"{before:.4g} -> {after:.4g}" + (f" ({rel:+.1%})" if rel is not None else "")


def noise_scale(x: np.ndarray) -> float:
    """Robust run-to-run noise: the median absolute successive difference / (0.6745 sqrt 2), which a level step
    barely moves; the plain deviation where that is 0."""
    d = np.diff(x)
    mad = float(np.median(np.abs(d - np.median(d)))) / 0.6745 / math.sqrt(2) if len(d) else 0.0
    return mad if mad > 0 else float(np.std(x))


def welch_p(left: np.ndarray, right: np.ndarray) -> float:
    """Two-sided Welch p of two groups' means; 0 when both are constant and differ, 1 when they are equal."""
    if np.ptp(left) == 0 and np.ptp(right) == 0:
        return 1.0 if left[0] == right[0] else 0.0
    with warnings.catch_warnings():  # near-constant groups: scipy warns of precision loss, the p is still right
        warnings.simplefilter("ignore", RuntimeWarning)
        p = stats.ttest_ind(left, right, equal_var=False).pvalue
    return float(p) if np.isfinite(p) else 1.0


def candidates(x: np.ndarray, min_size: int, penalty: float) -> list[int]:
    scale = noise_scale(x)
    if scale == 0 or len(x) < 2 * min_size:
        return []
    z = (x - np.median(x)) / scale
    ends = ruptures.Binseg(model="l2", min_size=min_size, jump=1).fit(z).predict(pen=penalty * math.log(len(x)))
    return ends[:-1]  # ruptures ends every segment, the series' end included


def significant(x: np.ndarray, cuts: list[int], max_p: float) -> list[tuple[int, float]]:
    """The cuts that survive the merge step: the one with the largest p removed while it is >= max_p."""
    cuts = sorted(cuts)
    while cuts:
        edges = [0, *cuts, len(x)]
        ps = [welch_p(x[edges[i]:edges[i + 1]], x[edges[i + 1]:edges[i + 2]]) for i in range(len(cuts))]
        worst = int(np.argmax(ps))
        if ps[worst] < max_p:
            return list(zip(cuts, ps, strict=True))
        del cuts[worst]
    return []


def change_points(values: list[float], max_p: float = MAX_P, min_size: int = MIN_SIZE,
                  penalty: float = PENALTY) -> list[ChangePoint]:
    """Every significant level change of a series, oldest first. Non-finite values are not runs: callers pass only
    measured ones (and keep their own index map)."""
    raw = np.asarray(values, dtype=float)
    log = bool(len(raw)) and bool(np.all(raw > 0))
    x = np.log(raw) if log else raw
    kept = significant(x, candidates(x, min_size, penalty), max_p)
    edges = [0, *(c for c, _ in kept), len(x)]

    def level(segment: np.ndarray) -> float:
        return float(np.exp(segment.mean())) if log else float(segment.mean())

    return [ChangePoint(index=c, before=level(x[edges[i]:c]), after=level(x[c:edges[i + 2]]), p_value=p)
            for i, (c, p) in enumerate(kept)]
