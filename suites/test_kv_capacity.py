"""KV capacity per arm, parsed from the server's own log and cross-checked with its /metrics."""

from harness.config import gates
from harness.serve.launch import backend_verdict
from harness.measure.metrics import cache_config, fetch_metrics, label_int
from harness.records.schema import KvCapacityRecord


def test_kv_capacity(served_arm, record):
    name = served_arm.arm.name
    kv = served_arm.info.kv_capacity
    assert kv is not None, f"arm {name!r}: no 'KV cache size: N tokens' line in {served_arm.server.log_path}"
    info = cache_config(fetch_metrics(served_arm.info.base_url))
    metrics_tokens = label_int(info, "kv_cache_size_tokens")
    p = served_arm.arm.parallelism
    record(KvCapacityRecord, arm=name, device=kv.device, tokens=kv.tokens, gib_per_worker=kv.gib, tp=p.tp,
           dcp=p.dcp, source_line=kv.line, metrics_tokens=metrics_tokens,
           num_blocks=label_int(info, "num_gpu_blocks"), block_size=label_int(info, "block_size"))
    assert kv.tokens > 0, f"arm {name!r}: KV capacity is {kv.tokens} tokens ({kv.line})"
    mismatch = gates.kv_capacity_agrees(name, kv.tokens, metrics_tokens)
    assert mismatch is None, mismatch


def test_attention_backend(served_arm):
    verdict = backend_verdict(served_arm.arm.attention.expected, served_arm.info.backends)
    assert verdict.ok, f"arm {served_arm.arm.name!r}: {verdict.detail}"
