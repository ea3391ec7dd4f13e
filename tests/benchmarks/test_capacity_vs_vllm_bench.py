"""benchmarks/capacity_vs_vllm_bench.py's report: each client beside the server's own medians (pure)."""

import argparse
import sys

import pytest

from harness.config.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))  # the benchmark imports its siblings as a script does

from benchmarks.capacity_vs_vllm_bench import server_table  # noqa: E402


def fine(ms):
    """The 1 % bucket holding `ms` (as --custom-histogram-buckets gives), in seconds."""
    return [ms / 1.01 / 1e3, ms / 1e3]


def client(tpot_ms, srv_tpot_ms, ttft_ms=100.0, srv_ttft_ms=100.0, tpot_bucket=None):
    return {"tpot_p50": tpot_ms / 1e3, "srv_tpot_p50": srv_tpot_ms / 1e3, "ttft_p50": ttft_ms / 1e3,
            "srv_ttft_p50": srv_ttft_ms / 1e3, "srv_tpot_p50_bucket": tpot_bucket or fine(srv_tpot_ms),
            "srv_ttft_p50_bucket": fine(srv_ttft_ms)}


def test_server_table_puts_each_client_beside_the_servers_median_and_names_the_worst_ratio():
    arm = {"arm": "a", "levels": [{"concurrency": 1, "harness": client(2.46, 2.40), "bare": client(1.48, 1.47),
                                   "bench": client(1.94, 1.50)}]}
    lines = server_table(arm)
    assert "2.460/2.400" in lines[2] and "1.940/1.500" in lines[2]
    assert "  TPOT p50 bench/server: worst 1.293 (+29.3 %); within 5 % at 0/1" in lines
    assert "  TPOT p50 bare/server: worst 1.007 (+0.7 %); within 5 % at 1/1" in lines


def test_server_table_is_empty_for_levels_measured_without_the_servers_histograms():
    old = {"arm": "a", "levels": [{"concurrency": 1, "harness": {"tpot_p50": 0.002}, "bare": {}, "bench": {}}]}
    assert server_table(old) == []


def test_a_server_median_in_a_wide_default_bucket_is_shown_as_its_bucket_and_compared_with_nothing():
    # vLLM 0.25.0 (no --custom-histogram-buckets): TPOT buckets start at (0, 10 ms], every 2-3 ms median reads 5 ms.
    default = [0.0, 0.01]
    arm = {"arm": "a", "levels": [{"concurrency": 1, "harness": client(3.10, 5.0, tpot_bucket=default),
                                   "bare": client(2.23, 5.0, tpot_bucket=default),
                                   "bench": client(2.08, 5.0, tpot_bucket=default)}]}
    lines = server_table(arm)
    assert "3.100/(0,10]" in lines[2]
    assert "  TPOT p50 bench/server: no level's server median resolved to 5 % (no arbiter)" in lines
    assert "  TTFT p50 bench/server: worst 1.000 (+0.0 %); within 5 % at 1/1" in lines


def test_a_file_without_the_buckets_reads_unresolved_not_compared():
    old = client(2.0, 5.0)
    del old["srv_tpot_p50_bucket"]
    arm = {"arm": "a", "levels": [{"concurrency": 1, "harness": old, "bare": old, "bench": old}]}
    lines = server_table(arm)
    assert "2.000/?" in lines[2]
    assert "  TPOT p50 harness/server: no level's server median resolved to 5 % (no arbiter)" in lines


def test_the_servers_mean_from_sum_and_count_arbitrates_where_its_median_bucket_cannot():
    default = [0.0, 0.01]
    harness = {**client(3.10, 5.0, tpot_bucket=default), "tpot_mean": 3.10e-3, "srv_tpot_mean": 3.00e-3}
    bench = {**client(2.08, 5.0, tpot_bucket=default), "tpot_mean": 2.08e-3, "srv_tpot_mean": 2.60e-3}
    arm = {"arm": "a", "levels": [{"concurrency": 1, "harness": harness, "bare": harness, "bench": bench}]}
    lines = server_table(arm)
    assert "  TPOT mean harness/server: worst 1.033 (+3.3 %); within 5 % at 1/1" in lines
    assert "  TPOT mean bench/server: worst 0.800 (-20.0 %); within 5 % at 0/1" in lines


def means(tok_s, tpot_ms, e2e_ms, srv_tpot_ms, srv_e2e_ms):
    return {"tok_s": tok_s, "tpot_mean": tpot_ms / 1e3, "e2e_mean": e2e_ms / 1e3,
            "srv_tpot_mean": srv_tpot_ms / 1e3, "srv_e2e_mean": srv_e2e_ms / 1e3}


def test_clients_apart_because_the_server_ran_their_requests_apart_agree_after_the_servers_own_ratio():
    from benchmarks.capacity_vs_vllm_bench import server_normalized

    # The server itself ran the harness's requests 20 % slower than the bench's (H200 2026-12-04, c2): the clients
    # say so too, and agree once the server's ratio is taken out; throughput follows the inverse E2E ratio.
    lv = {"concurrency": 2, "harness": means(500.0, 2.4, 360.0, 2.38, 352.0),
          "bench": means(600.0, 2.0, 300.0, 2.0, 293.3)}
    lines = server_normalized({"arm": "a", "levels": [lv]})
    assert "  TPOT mean harness/bench after the server's own difference: worst 1.008 (+0.8 %); within 5 % at 1/1" \
        in lines
    assert "  out tok/s harness/bench after the server's own difference: worst 1.000 (+0.0 %); within 5 % at 1/1" \
        in lines
    assert any("c2 1.200/1.190 = 1.008" in line for line in lines)


def test_a_client_that_misreads_tpot_is_caught_after_the_servers_own_ratio():
    from benchmarks.capacity_vs_vllm_bench import server_normalized

    # Planted: the server ran both clients' requests alike, but the harness's client reads TPOT 10 % low (tokens
    # that reached it late in a burst) and its E2E right.
    lv = {"concurrency": 1, "harness": means(300.0, 1.8, 300.0, 2.0, 300.0),
          "bench": means(300.0, 2.0, 300.0, 2.0, 300.0)}
    lines = server_normalized({"arm": "a", "levels": [lv]})
    assert "  TPOT mean harness/bench after the server's own difference: worst 0.900 (-10.0 %); within 5 % at 0/1" \
        in lines
    assert "  E2E mean harness/bench after the server's own difference: worst 1.000 (+0.0 %); within 5 % at 1/1" \
        in lines


def test_repeatability_reads_each_clients_second_run_against_its_first_beside_the_servers():
    from benchmarks.capacity_vs_vllm_bench import repeatability

    first, again = means(300.0, 2.0, 300.0, 2.0, 300.0), means(240.0, 2.6, 390.0, 2.6, 385.0)
    lines = repeatability({"arm": "a", "levels": [{"concurrency": 1, "bench": first, "bench#2": again}]})
    assert lines[0] == "arm a: bench#2 / bench (the same client and requests, measured again):"
    assert "  TPOT mean: c1 1.300 (server 1.300); worst 1.300 (+30.0 %), within 5 % at 0/1" in lines
    assert "  out tok/s: c1 0.800; worst 0.800 (-20.0 %), within 5 % at 0/1" in lines
    assert repeatability({"arm": "a", "levels": [{"concurrency": 1, "bench": first}]}) == []  # no repeat, no lines


def test_repeat_takes_a_count_of_at_least_one_before_any_server_starts():
    from benchmarks.capacity_vs_vllm_bench import positive_int

    assert positive_int("2") == 2
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
            positive_int(bad)
