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


def mcnemar_min_lost(c: int, reference_right: int, alpha: float) -> int | None:
    """The fewest questions b the candidate must lose for exact McNemar to reject at alpha, given c only it got
    right; None when no drop is detectable (e.g. 0/16 against 0/16)."""
    for b in range(c + 1, reference_right + 1):
        if mcnemar_exact_p(b, c) < alpha:
            return b
    return None


def paired_power(ref: str, n: int, c: int, reference_right: int, alpha: float, items: str) -> tuple[int | None, str]:
    """(the fewest of n paired `items` the candidate must lose for exact McNemar to reject at alpha, or None; the
    sentence stating the smallest drop they could show). Only items the reference got right can be lost: a tiny model
    that answers none (0/16 against 0/16) can show no drop at all."""
    lost = mcnemar_min_lost(c, reference_right, alpha)
    if lost is None:
        needed = mcnemar_min_lost(c, n - c, alpha)
        return None, (f"no accuracy drop is detectable: {ref} got {reference_right} of {n} paired {items} right, "
                      f"and exact McNemar at alpha {alpha:.3g} needs "
                      + (f"{needed} lost" if needed else f"more than the {n} {items.split()[-1]}") + f" with {c} won")
    return lost, (f"smallest detectable drop {100 * (lost - c) / n:.1f} pt ({lost} of {n} paired {items} lost "
                  f"with {c} won, exact McNemar at alpha {alpha:.3g})")


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


def smallest_detectable_slowdown(current: list[float], baseline: list[float], alpha: float,
                                 effect: float) -> float | None:
    """The smallest relative median slowdown d the baseline diff flags (this run's samples moved to the baseline's
    median, slowed by d, Mann-Whitney p < alpha); None when so few requests cannot reach alpha."""
    from scipy.stats import mannwhitneyu

    mid = float(np.median(current))
    if not current or not baseline or mid <= 0 or smallest_p(len(current), len(baseline)) >= alpha:
        return None
    cur = np.asarray(current, float) * (float(np.median(baseline)) / mid)

    def rejects(d: float) -> bool:
        return float(mannwhitneyu(cur * (1 + d), baseline, alternative="greater").pvalue) < alpha

    high = 1.0
    while not rejects(high):  # p falls as d grows: every sample ends above every baseline sample
        high *= 2
        if high > 1e6:
            return None
    low = 0.0
    for _ in range(40):  # p is a step function of d: bisect to well under a tenth of a percent
        d = (low + high) / 2
        low, high = (low, d) if rejects(d) else (d, high)
    return max(high, effect)
