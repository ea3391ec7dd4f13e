"""The capacity ramp's pure parts: the prompts (request i the same at every level, distinct across requests), which
server signal names a saturated level, and a level's figures from raw samples and /metrics points."""

from __future__ import annotations

from pathlib import Path

from harness.config.workloads import CapacityWorkload
from harness.measure.capacity import LevelMetrics, build_capacity_prompts, level_fields, level_prompts, saturation
from harness.measure.loadgen import LevelSamples, RequestSample
from harness.measure.prompts import TokenSpace

W = CapacityWorkload(name="w", suffix_tokens=16, output_tokens=8, concurrency=[1, 2, 4, 8], rounds=2)


def test_request_i_is_the_same_prompt_at_every_level_and_prompts_are_distinct():
    prompts = build_capacity_prompts(W, TokenSpace(vocab_size=512, excluded=frozenset()))
    assert len(prompts) == 16 and len({tuple(p) for p in prompts}) == 16 and all(len(p) == 16 for p in prompts)
    assert level_prompts(W, prompts, 2) == prompts[:4] and level_prompts(W, prompts, 8) == prompts
    shared = W.model_copy(update={"prefix_tokens": 8})
    with_prefix = build_capacity_prompts(shared, TokenSpace(vocab_size=512, excluded=frozenset()))
    assert len({tuple(p[:8]) for p in with_prefix}) == 1 and len({tuple(p) for p in with_prefix}) == 16


def test_saturation_names_the_signal():
    assert saturation(W, 4, 0.5, 0.0, 0.0, 4, 0) is None  # everything in flight ran, nothing waited
    assert "2 preemption(s)" in saturation(W, 8, 0.5, 0.0, 2.0, 8, 0)
    assert saturation(W, 8, 0.7, 0.2, 0.0, 4, 4) == "at most 4 of 8 requests in flight ran at once; the rest waited"
    assert "requests waiting in 60%" in saturation(W, 8, 0.7, 0.6, 0.0, 8, 2)
    assert "KV usage peak 97%" in saturation(W, 8, 0.97, 0.0, 0.0, 8, 0)


def sample(i: int, ok: bool = True) -> RequestSample:
    s = RequestSample(level=2, index=i, prompt_tokens=16, start_ns=0, ttft_ns=50_000_000 if ok else None,
                      latency_ns=250_000_000 if ok else None, output_tokens=8 if ok else None,
                      chunk_offsets_ns=[50_000_000 + 25_000_000 * k for k in range(8)] if ok else [],
                      error=None if ok else "HTTP 500")
    return s


def test_level_fields_from_samples_and_metrics_points(tmp_path: Path):
    run = LevelSamples([sample(1), sample(0), sample(2), sample(3, ok=False)], None, 1_000, 2_000_001_000)
    points = [(t, {"kv_usage": kv, "running": 2, "waiting": w, "prefix_hits": 0, "prefix_queries": 0})
              for t, kv, w in ((500, 0.1, 0), (1_000_000, 0.6, 1), (1_500_000_000, 0.9, 2), (2_000_000_000, 0.4, 0))]
    before = {"preemptions": 3.0, "prefix_hits": 0.0, "prefix_queries": 0.0}
    after = {"preemptions": 5.0, "prefix_hits": 0.0, "prefix_queries": 64.0}
    f = level_fields(W, 2, run, LevelMetrics(points, before, after), 1, "sha", tmp_path / "s.jsonl")
    assert (f["requests"], f["planned"], f["failed"], f["output_tokens"]) == (4, 4, 1, 24)
    assert abs(f["output_tokens_per_s"] - 12.0) < 1e-9 and abs(f["requests_per_s"] - 1.5) < 1e-9
    assert f["ttft_samples_s"] == [0.05, 0.05, 0.05, None]  # request order, a failed request None
    assert f["kv_usage"].peak == 0.9 and f["preemptions"] == 2.0 and f["saturated"]
    assert f["saturation"].startswith("2 preemption(s)") and f["waiting_share"] == 2 / 3
    assert f["status"] == "complete" and f["errors"] == ["request 3: HTTP 500"]


def test_a_cut_level_keeps_the_requests_that_finished(tmp_path: Path):
    from harness.measure.capacity import partial_level

    sink = tmp_path / "capacity_c4.jsonl"
    done = [sample(0), sample(2)]
    done[0].token_ids, done[0].top = [5, 6], [{5: -0.1, 7: -2.0}, {6: -0.2, 8: -3.0}]
    sink.write_text("".join(s.to_json() + "\n" for s in done))
    run = partial_level(sink, 0)
    assert [s.index for s in run.samples] == [0, 2] and run.samples[0].top[0] == {5: -0.1, 7: -2.0}
    assert run.aborted is None and run.end_ns > run.start_ns
    assert partial_level(tmp_path / "none.jsonl", 0).samples == []


def test_a_level_counts_its_buffered_requests(tmp_path: Path):
    from harness.records.schema import CapacityRecord
    from harness.report.capacity import capacity_table

    at_once = sample(2)
    at_once.chunk_offsets_ns = [249_000_000 + 10_000 * k for k in range(8)]  # 8 chunks within 0.07 ms at the end
    f = level_fields(W, 2, LevelSamples([sample(0), sample(1), at_once], None, 0, 2_000_000_000),
                     LevelMetrics([], None, None), 1, "sha", tmp_path / "s.jsonl")
    # the SLO still reads every request's TPOT as the bench computes it (a level of buffered requests keeps one to
    # judge); the count says how many of them timed a delivery
    assert f["buffered_requests"] == 1 and f["tpot"].n == 3 and f["tpot_samples_s"][2] is not None
    r = CapacityRecord(run_id="r", arm="a", suite="capacity", **f)
    [cell] = capacity_table([r], ["a"], {}, set())["TPOT p50/p99 ms"].tolist()
    assert cell.endswith(" (1 buffered: delivery, not decode)"), cell
    clean = r.model_copy(update={"buffered_requests": 0})
    assert "buffered" not in capacity_table([clean], ["a"], {}, set())["TPOT p50/p99 ms"].tolist()[0]
