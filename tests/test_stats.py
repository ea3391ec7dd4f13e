import math

import numpy as np
import pytest

from harness.stats import histogram_quantile, percentile, summarize


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
