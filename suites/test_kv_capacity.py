"""KV capacity per arm, parsed from the server's own log, and the attention backend it selected."""

from harness.launch import backend_verdict
from harness.results import KvCapacityRecord


def test_kv_capacity(served_arm, record):
    kv = served_arm.info.kv_capacity
    assert kv is not None, (
        f"arm {served_arm.arm.name!r}: no 'KV cache size: N tokens' line in {served_arm.server.log_path}")
    p = served_arm.arm.parallelism
    record(KvCapacityRecord, arm=served_arm.arm.name, device=kv.device, tokens=kv.tokens,
           gib_per_worker=kv.gib, tp=p.tp, dcp=p.dcp, source_line=kv.line)
    assert kv.tokens > 0, f"arm {served_arm.arm.name!r}: KV capacity is {kv.tokens} tokens ({kv.line})"


def test_attention_backend(served_arm):
    verdict = backend_verdict(served_arm.arm.attention.expected, served_arm.info.backends)
    assert verdict.ok, f"arm {served_arm.arm.name!r}: {verdict.detail}"
