"""Statistical tests (pure), through scipy.stats: accuracy counts, and per-request timings of two runs."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binomtest, norm


def mcnemar_exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value on discordant pairs (b: only the reference right, c: only the candidate):
    the exact binomial test of b successes in b + c trials at 1/2."""
    if b + c == 0:
        return 1.0
    return float(binomtest(b, b + c, 0.5).pvalue)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes out of n; (0, 1) for no trials."""
    if n == 0:
        return 0.0, 1.0
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return max(0.0, float(ci.low)), min(1.0, float(ci.high))


def two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test (unpaired: different or unmatched questions)."""
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    return float(2 * norm.sf(abs(k1 / n1 - k2 / n2) / se))


def slowdown_test(current: list[float], baseline: list[float], seed: int = 0, resamples: int = 2000,
                  confidence: float = 0.95) -> tuple[float, float, tuple[float, float]]:
    """Per-request times of two runs: (one-sided Mann-Whitney p that `current` is slower, relative change of the
    median, bootstrap interval of that change). The rank test judges the shift against each run's own spread, so
    two runs of the same code are not told apart by a few noisy requests. Both lists non-empty."""
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(current, baseline, alternative="greater").pvalue)
    cur, base = np.asarray(current, float), np.asarray(baseline, float)
    change = float(np.median(cur) / np.median(base) - 1)
    rng = np.random.default_rng(seed)  # seeded: the same runs give the same interval
    boot = (np.median(rng.choice(cur, (resamples, cur.size)), axis=1)
            / np.median(rng.choice(base, (resamples, base.size)), axis=1) - 1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return p, change, (float(low), float(high))


def smallest_p(n1: int, n2: int) -> float:
    """The smallest one-sided exact Mann-Whitney p that n1 vs n2 samples can reach: when it is not below alpha, no
    slowdown can be shown with so few requests."""
    return 1 / math.comb(n1 + n2, n1)
