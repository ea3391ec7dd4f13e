import math

import numpy as np
import pytest

from harness.judge.stats import histogram_quantile, percentile, summarize


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], list(np.linspace(0.01, 0.9, 37))])
def test_percentiles_match_numpy_linear(values):
    s = summarize(values)
    for q, got in ((50, s.p50), (90, s.p90), (99, s.p99)):
        assert math.isclose(got, float(np.percentile(values, q)), rel_tol=1e-12)
    assert math.isclose(s.mean, float(np.mean(values)))


def test_empty_summary_is_none_not_zero():
    s = summarize([])
    assert s.n == 0 and s.p50 is None and s.mean is None
    with pytest.raises(ValueError):
        percentile([], 50)


def test_histogram_quantile_like_prometheus():
    buckets = [(0.01, 0.0), (0.025, 10.0), (0.05, 30.0), (float("inf"), 30.0)]
    assert math.isclose(histogram_quantile(0.5, buckets), 0.025 + 0.025 * (5 / 20))
    assert histogram_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None


def test_mcnemar_exact_matches_binomial_test():
    from scipy.stats import binomtest

    from harness.judge.stats import mcnemar_exact_p

    for b, c in ((0, 0), (3, 0), (10, 2), (25, 40), (60, 50)):
        expected = 1.0 if b + c == 0 else binomtest(min(b, c), b + c, 0.5).pvalue
        assert math.isclose(mcnemar_exact_p(b, c), expected, rel_tol=1e-9)
    assert mcnemar_exact_p(12, 2) < 0.05 < mcnemar_exact_p(7, 2)


def test_wilson_interval_seed_numbers():
    from harness.judge.stats import wilson_interval

    lo, hi = wilson_interval(1269, 1319)  # TP8 in the seed: 96.21%
    assert 0.950 < lo < 0.9621 < hi < 0.972
    assert wilson_interval(0, 0) == (0.0, 1.0) and wilson_interval(0, 10)[0] == 0.0
