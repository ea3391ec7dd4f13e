"""KV capacity per arm, parsed from the server's own log and cross-checked with its /metrics."""

from harness.judge.checks import attention_backend_fallback, kv_capacity_agrees
from harness.measure.metrics import cache_config, fetch_metrics, label_int
from harness.records.schema import KvCapacityRecord
from harness.serve.serverlog import parse_kv_capacity


def test_kv_capacity(served_arm, record):
    name = served_arm.arm.name
    kv = parse_kv_capacity(served_arm.server.log_text())
    assert kv is not None, f"arm {name!r}: no 'KV cache size: N tokens' line in {served_arm.server.log_path}"
    info = cache_config(fetch_metrics(served_arm.info.base_url))
    metrics_tokens = label_int(info, "kv_cache_size_tokens")
    p = served_arm.arm.parallelism
    record(KvCapacityRecord, arm=name, device=kv.device, tokens=kv.tokens, gib_per_worker=kv.gib, tp=p.tp,
           dcp=p.dcp, source_line=kv.line, metrics_tokens=metrics_tokens,
           num_blocks=label_int(info, "num_gpu_blocks"), block_size=label_int(info, "block_size"))
    assert kv.tokens > 0, f"arm {name!r}: KV capacity is {kv.tokens} tokens ({kv.line})"
    mismatch = kv_capacity_agrees(name, kv.tokens, metrics_tokens)
    assert mismatch is None, mismatch


def test_attention_backend(served_arm):
    fallback = attention_backend_fallback(served_arm.arm.name, served_arm.arm.attention.expected,
                                          served_arm.info.backends)
    assert fallback is None, fallback
