"""The history keeps no timing of a level whose streams reached the client at once (issue 47 item 8): its TPOT and
ITL timed the delivery and its TTFT is the E2E. CPU nights 05, 06, 11 and 12 (docs/evidence/cpu-history-2026-12-04)
trended such a c1 TPOT p50 of 0.018 ms beside clean nights' 4-6 ms, and `history check` read "improvements" and
"regressions" into it."""

from __future__ import annotations

from harness.history.extract import metrics_of
from harness.measure.loadgen import LevelSamples
from harness.measure.long_prefix import LevelMeasurement, Measurement, level_fields
from harness.records.schema import LongPrefixRecord, Summary, Usage
from tests.measure.test_loadgen import MS, buffered, sample


def record(samples) -> LongPrefixRecord:
    """The LongPrefixRecord the suite writes for one c1 level of these samples."""
    run = LevelSamples(samples, None, start_ns=0, end_ns=2_000 * MS)
    m = Measurement(warmup=run, levels=[], metrics_points=[(MS, {"kv_usage": 0.5})], nvml_points=[],
                    nvml_available=False)
    return LongPrefixRecord(run_id="r", arm="cpu-smoke", suite="long_prefix", workload="w", prompts_sha="x",
                            samples_path="s", **level_fields(LevelMeasurement(1, run, None, None), m))


def names(records) -> set[str]:
    return {m.metric for m in metrics_of(records)}


def test_a_buffered_level_gives_no_timing_metric_but_keeps_its_kv_usage():
    partly = sample(3, ttft_ms=225, latency_ms=300, out=32, chunks_ms=[225 + 2.4 * k for k in range(32)])
    got = names([record([buffered(0), buffered(1), buffered(2), partly])])
    assert got == {"long_prefix.c1.kv_usage_peak"}, got


def test_a_live_level_gives_its_timing_metrics_as_before():
    steady = [sample(i, ttft_ms=100, latency_ms=410, out=32, chunks_ms=[100 + 10 * k for k in range(32)])
              for i in range(4)]
    r = record(steady)
    assert r.buffered_requests == 0 and r.timing_invalid is None  # counted, and none was buffered
    rows = {m.metric: m.value for m in metrics_of([r])}
    assert rows["long_prefix.c1.tpot_p50_ms"] == 10.0 and rows["long_prefix.c1.ttft_p50_ms"] == 100.0
    assert {f"long_prefix.c1.{n}_{q}_ms" for n in ("tpot", "ttft", "itl") for q in ("p50", "p90", "p99")} <= set(rows)


def test_an_older_buffered_record_is_not_trended_either():
    # night 05's c1 record as written before buffered_requests: its figures are the buffered ones
    def night(tpots: list[float]) -> LongPrefixRecord:
        s = Summary.of(tpots)
        return LongPrefixRecord(run_id="r", arm="cpu-smoke", suite="long_prefix", workload="w", prompts_sha="x",
                                concurrency=1, status="complete", requests=4, failed=0, ttft=Summary.of([0.2246] * 4),
                                tpot=s, itl=s, e2e=Summary.of([0.2253] * 4), kv_usage=Usage(mean=0.5, peak=0.98, n=9),
                                gpu_memory_mib=None, samples_path="s", tpot_samples_s=tpots)

    assert names([night([1.87e-5, 1.89e-5, 2.01e-5, 2.39e-3])]) == {"long_prefix.c1.kv_usage_peak"}
    assert "long_prefix.c1.tpot_p50_ms" in names([night([4.0e-3, 4.1e-3, 4.2e-3, 4.3e-3])])
