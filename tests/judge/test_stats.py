"""The package's statistics (scipy.stats, numpy) against independent implementations written from the definitions."""

import math

import pytest

from harness.judge.stats import mcnemar_exact_p, two_proportion_p, wilson_interval
from harness.records.schema import Summary


def linear_percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], [0.01 + i * 0.89 / 36 for i in range(37)]])
def test_percentiles_are_the_linear_method(values):
    s = Summary.of(values)
    for q, got in ((50, s.p50), (90, s.p90), (99, s.p99)):
        assert math.isclose(got, linear_percentile(values, q), rel_tol=1e-12)
    assert math.isclose(s.mean, sum(values) / len(values))


def test_empty_summary_is_none_not_zero():
    s = Summary.of([])
    assert s.n == 0 and s.p50 is None and s.mean is None


def exact_mcnemar(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def test_mcnemar_exact_matches_the_binomial_sum():
    for b, c in ((0, 0), (3, 0), (10, 2), (25, 40), (60, 50), (2, 0)):
        assert math.isclose(mcnemar_exact_p(b, c), exact_mcnemar(b, c), rel_tol=1e-9)
    assert mcnemar_exact_p(12, 2) < 0.05 < mcnemar_exact_p(7, 2)


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def test_wilson_interval_matches_the_score_formula_and_the_seed_numbers():
    for k, n in ((1269, 1319), (0, 10), (10, 10), (7, 16)):
        assert all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(wilson_interval(k, n), wilson(k, n), strict=True))
    lo, hi = wilson_interval(1269, 1319)  # TP8 in the seed: 96.21%
    assert 0.950 < lo < 0.9621 < hi < 0.972
    assert wilson_interval(0, 0) == (0.0, 1.0) and wilson_interval(0, 10)[0] == 0.0


def test_two_proportion_z_matches_erfc():
    k1, n1, k2, n2 = 30, 40, 22, 40
    pooled = (k1 + k2) / (n1 + n2)
    z = abs(k1 / n1 - k2 / n2) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    assert math.isclose(two_proportion_p(k1, n1, k2, n2), math.erfc(z / math.sqrt(2)), rel_tol=1e-9)
    assert two_proportion_p(0, 0, 1, 2) == 1.0 and two_proportion_p(5, 5, 5, 5) == 1.0
