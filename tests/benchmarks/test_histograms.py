"""benchmarks/histograms.py: the server-side histograms the benchmarks compare the harness's client with."""

import math

from benchmarks.histograms import bucket_delta, histogram_buckets, histogram_quantile

HIST = """\
# HELP vllm:request_time_per_output_token_seconds Histogram of time_per_output_token_seconds per request.
# TYPE vllm:request_time_per_output_token_seconds histogram
vllm:request_time_per_output_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 3.0
vllm:request_time_per_output_token_seconds_bucket{engine="0",le="0.025",model_name="m"} 7.0
vllm:request_time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 8.0
vllm:request_time_per_output_token_seconds_count{engine="0",model_name="m"} 8.0
vllm:request_time_per_output_token_seconds_sum{engine="0",model_name="m"} 0.1
"""


def test_histogram_buckets_and_delta():
    b = histogram_buckets(HIST, "vllm:request_time_per_output_token_seconds")
    assert b == [(0.01, 3.0), (0.025, 7.0), (float("inf"), 8.0)]
    assert bucket_delta([(0.01, 1.0), (0.025, 2.0), (float("inf"), 2.0)], b) == [(0.01, 2.0), (0.025, 5.0), (float("inf"), 6.0)]


def test_histogram_quantile_like_prometheus():
    buckets = [(0.01, 0.0), (0.025, 10.0), (0.05, 30.0), (float("inf"), 30.0)]
    assert math.isclose(histogram_quantile(0.5, buckets), 0.025 + 0.025 * (5 / 20))
    assert histogram_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None


def test_p50_bucket_is_the_bucket_of_the_median():
    from benchmarks.histograms import p50_bucket

    assert p50_bucket([(0.01, 3.0), (0.025, 7.0), (float("inf"), 8.0)]) == (0.01, 0.025)
    assert p50_bucket([(0.01, 4.0), (0.025, 7.0), (float("inf"), 8.0)]) == (0.0, 0.01)


def test_geometric_bounds_are_fine_and_cover_the_range():
    from benchmarks.histograms import FINE_BUCKETS, geometric_bounds

    b = geometric_bounds(0.001, 0.0011, 0.01)
    assert b[0] == 0.001 and b[-1] >= 0.0011 and len(b) == 11
    assert all(1.0099 < y / x < 1.0101 for x, y in zip(b, b[1:], strict=False))
    tpot = FINE_BUCKETS["inter_token_latency"]
    assert tpot[0] <= 0.0005 and tpot[-1] >= 2.0 and all(x < y for x, y in zip(tpot, tpot[1:], strict=False))


def test_server_p50_reads_the_medians_of_the_requests_between_two_scrapes():
    from benchmarks.histograms import server_p50

    def scrape(tpot_counts, ttft_counts):
        lines = []
        for name, counts in (("request_time_per_output_token_seconds", tpot_counts),
                             ("time_to_first_token_seconds", ttft_counts)):
            for le, n in zip(("0.001", "0.002", "+Inf"), counts, strict=True):
                lines.append(f'vllm:{name}_bucket{{engine="0",le="{le}",model_name="m"}} {n}')
        return "\n".join(lines) + "\n"

    # Before: 4 requests at <= 1 ms; between the scrapes, 4 more requests, all in (1, 2] ms.
    got = server_p50(scrape((4, 4, 4), (0, 4, 4)), scrape((4, 8, 8), (0, 8, 8)))
    assert got["tpot_bucket"] == (0.001, 0.002) and 0.001 < got["tpot"] <= 0.002
    assert got["ttft_bucket"] == (0.001, 0.002)
    assert got["tpot_mean"] is None  # these pages have no _sum/_count: no mean, never a made-up one


def test_server_mean_is_the_sum_over_the_count_of_the_requests_between_two_scrapes():
    from benchmarks.histograms import server_p50

    def scrape(n, total_s):
        return HIST.replace("_count{engine=\"0\",model_name=\"m\"} 8.0", f"_count{{engine=\"0\",model_name=\"m\"}} {n}") \
                   .replace("_sum{engine=\"0\",model_name=\"m\"} 0.1", f"_sum{{engine=\"0\",model_name=\"m\"}} {total_s}")

    # 8 requests then 12: the 4 between the scrapes took 0.0124 s of per-request TPOT in all, 3.1 ms each on average
    # (the whole page's sum over its count would read 9.4 ms).
    got = server_p50(scrape(8, 0.1), scrape(12, 0.1124))
    assert math.isclose(got["tpot_mean"], 0.0031)


def test_server_e2e_mean_counts_only_the_requests_between_two_scrapes():
    from benchmarks.histograms import server_p50

    def scrape(n, total_s):
        return (f'vllm:e2e_request_latency_seconds_sum{{engine="0",model_name="m"}} {total_s}\n'
                f'vllm:e2e_request_latency_seconds_count{{engine="0",model_name="m"}} {n}\n')

    # 2 requests took 1.0 s in all; the 3 after them 0.9 s: 0.3 s each, not the page's 0.38.
    assert math.isclose(server_p50(scrape(2, 1.0), scrape(5, 1.9))["e2e_mean"], 0.3)
    assert server_p50(scrape(5, 1.9), scrape(5, 1.9))["e2e_mean"] is None  # no request between: no mean
