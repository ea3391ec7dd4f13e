"""The long-prefix outputs check (pure): samples-file rows of both arms paired by request, compared as any
generation is (exact, first divergence, tie flip by the reference's top-2 gap, drift), a teacher-forced sample, and
every request that cannot be compared a "no data" line. The streamed tokens come from loadgen's per-chunk parse."""

from __future__ import annotations

import json
import math

from harness.measure.generation import Generation
from harness.measure.loadgen import RequestSample, completion_body, keep_tokens
from harness.records.schema import LongPrefixRecord, Summary
from harness.refcheck.judging.compare import checked_to
from harness.refcheck.judging.teacher_forcing import compare_forced
from harness.refcheck.judging.timed_outputs import (
    TimedComparisons,
    by_request,
    checked_fields,
    compare_pairs,
    forced_picks,
    generation_of,
    pair_outputs,
    samples_files,
)

PROMPT = 3544 - 32


def row(level: int, index: int, tokens: list[int], gap: float = 2.0, error: str | None = None,
        logprob: float = -0.1) -> dict:
    """A samples-file line as loadgen writes it: ids, chosen logprobs, top-2 (JSON keys are strings)."""
    return {"level": level, "index": index, "prompt_tokens": PROMPT, "error": error, "output_tokens": len(tokens),
            "token_ids": tokens, "logprobs": [logprob] * len(tokens),
            "top": [{str(t): logprob, str(t + 1): logprob - gap} for t in tokens]}


def arm(n: int = 4, tokens: list[int] | None = None, **kw) -> dict:
    tokens = tokens or list(range(100, 132))
    return by_request(row(c, i, tokens, **kw) for c in (1, 2) for i in range(n))


def judged(cand: dict, ref: dict, forced=(), tie_gap: float = 0.0, drift: float = 0.01, extra=()):
    pairs, gaps = pair_outputs(cand, ref, "cpu-smoke", "cpu-ref")
    return checked_fields(TimedComparisons(compare_pairs(pairs), list(forced), gaps, None), "cpu-ref", drift, tie_gap,
                          extra)


def test_identical_outputs_pass_and_are_checked_to_prompt_plus_output():
    f = judged(arm(), arm())
    assert f.passed and f.status == "complete" and f.requests == 8 and f.exact_matches == 8
    assert f.checked_to_tokens == 3544 and f.max_drift == 0.0 and f.check == "long_prefix_outputs"
    assert f.detail == "long_prefix_outputs: 8/8 exact, max drift 0 (limit 0.01)"


def test_a_planted_divergence_at_the_second_token_fails_naming_request_and_gap():
    # the MLA fault: same engine, 34k prompts, outputs differ from the 2nd generated token
    bad = list(range(100, 132))
    bad[1] = 7
    cand = {**arm(), (2, 3): row(2, 3, bad)}
    f = judged(cand, arm())
    assert not f.passed and f.status == "complete" and f.exact_matches == 7
    assert f.first_divergence_min == 1
    assert f.diverged == ["request c2 #3 [c2]: generated token 1 differs from the reference (32 vs 32 tokens, "
                             "where the reference's top-2 gap is 2)"]
    assert f.checked_to_tokens == 3544  # the exact requests reached the whole context


def test_a_near_tie_flip_late_in_a_bf16_output_is_not_a_fault():
    late = list(range(100, 132))
    late[30] = 131  # the reference's own runner-up at position 30
    ref = {**arm(), (1, 0): {**row(1, 0, list(range(100, 132)), gap=0.125)}}
    cand = {**arm(), (1, 0): row(1, 0, late)}
    assert not judged(cand, ref).passed  # tie_gap 0 (the CPU pair: float32, bit-identical)
    f = judged(cand, ref, tie_gap=0.5)  # the GPU tiny MLA model's limits
    assert f.passed and f.tie_flips == 1 and "1 tie flip(s)" in f.detail


def test_drift_before_the_divergence_beyond_the_limit_fails():
    f = judged(arm(logprob=-0.5), arm(logprob=-0.1))
    assert not f.passed and "max |delta logprob| 0.4 > 0.01" in f.diverged[0]


def test_requests_that_cannot_be_compared_are_no_data_never_dropped():
    ref = arm()
    ref[(1, 3)] = row(1, 3, [], error="HTTP 500: engine error")
    del ref[(2, 0)]
    old = {k: {kk: vv for kk, vv in v.items() if kk not in ("token_ids", "logprobs", "top")} for k, v in arm().items()}
    f = judged(arm(), ref)
    assert not f.passed and f.status == "aborted" and f.requests == 6
    assert f.reason == "no data: request c1 #3: cpu-ref's request failed (HTTP 500: engine error) (and 1 more)"
    assert "no data: request c2 #0: cpu-ref has no sample for it" in f.diverged
    g = judged(old, arm())
    assert g.status == "aborted" and "cpu-smoke's sample has no output tokens (written before outputs were kept)" \
        in g.reason
    cand = arm()
    cand[(2, 1)] = row(2, 1, [], error="ReadTimeout")
    assert "cpu-smoke's request failed (ReadTimeout)" in judged(cand, arm()).reason
    nothing = checked_fields(TimedComparisons([], [], [], None), "cpu-ref", 0.01, 0.0)
    assert not nothing.passed and nothing.reason == "no data: no request was compared"


def test_degeneration_lines_fail_the_check():
    f = judged(arm(), arm(), extra=["request c1 #0: more repetitive than the reference: repeated span of 30"])
    assert not f.passed and f.diverged[0].startswith("request c1 #0: more repetitive")
    assert "repeated span of 30" in f.detail


def test_teacher_forced_sample_is_judged_and_reaches_the_whole_context():
    ref = generation_of(row(1, 0, list(range(100, 132))))
    same = Generation(ref.token_ids, ref.logprobs, [{t: -0.1} for t in ref.token_ids])
    forced = [compare_forced("c1 #0", PROMPT, same, ref, "c1 forced")]
    f = judged(arm(), arm(), forced)
    assert f.passed and "teacher-forced sample: 1/1 exact" in f.detail and f.checked_to_tokens == 3544
    wrong = Generation(ref.token_ids, [-3.0] * 32, [{5: -0.01} for _ in ref.token_ids])  # argmax elsewhere
    f = judged(arm(), arm(), [compare_forced("c1 #0", PROMPT, wrong, ref, "c1 forced")])
    assert not f.passed and f.diverged[0].startswith("teacher-forced request c1 #0 [c1 forced]: generated "
                                                           "token 0 differs")
    # a free generation diverging at token 1 checked only to there; the forced one reaches every position
    early = compare_pairs(pair_outputs({(1, 0): row(1, 0, [1, 2, 3])}, {(1, 0): row(1, 0, [1, 9, 3])}, "a", "b")[0])
    assert checked_to(early) == PROMPT + 2 and checked_to(early + forced) == PROMPT + 32


def test_forced_picks_spread_over_the_requests():
    keys = sorted(arm())
    assert forced_picks(keys, 2) == [(1, 0), (2, 3)]
    assert forced_picks(keys, 3) == [(1, 0), (2, 0), (2, 3)]
    assert forced_picks(keys, 0) == [] and forced_picks(keys, 99) == keys and forced_picks([], 2) == []


def test_samples_files_need_the_same_prompts():
    def rec(a, c, sha="sha"):
        return LongPrefixRecord(run_id="r", arm=a, suite="long_prefix", workload="w", prompts_sha=sha, concurrency=c,
                                status="complete", requests=1, failed=0, ttft=Summary.of([]), tpot=Summary.of([]),
                                itl=Summary.of([]), e2e=Summary.of([]), kv_usage=None, gpu_memory_mib=None,
                                samples_path=f"/run/{a}/long_prefix_c{c}.jsonl")
    assert samples_files([rec("ref", 1), rec("ref", 2)], "ref", "sha") == (
        {1: "/run/ref/long_prefix_c1.jsonl", 2: "/run/ref/long_prefix_c2.jsonl"}, [])
    assert samples_files([], "ref", "sha")[1] == ["no data: ref recorded no long_prefix level (its test failed or "
                                                  "did not run)"]
    assert "was sent other prompts (prompts_sha x, not sha)" in samples_files([rec("ref", 1, "x")], "ref", "sha")[1][0]


def test_streamed_chunks_keep_ids_logprobs_and_top2_that_read_back_as_a_generation():
    body = completion_body("m", [1, 2], 3)
    assert body["logprobs"] == 2 and body["return_tokens_as_token_ids"] and body["stream"]
    s = RequestSample(level=1, index=0, prompt_tokens=2)
    # vLLM's streamed completion chunks with logprobs: one token per chunk, or several (speculative decoding)
    keep_tokens(s, {"text": "a", "logprobs": {"tokens": ["token_id:7"], "token_logprobs": [-0.5],
                                              "top_logprobs": [{"token_id:7": -0.5, "token_id:8": -1.5}]}})
    keep_tokens(s, {"text": "bc", "logprobs": {"tokens": ["token_id:9", "token_id:3"], "token_logprobs": [None, -0.2],
                                               "top_logprobs": [{"token_id:9": -0.1}, None]}})
    assert s.token_ids == [7, 9, 3] and s.logprobs == [-0.5, None, -0.2] and s.top[0] == {7: -0.5, 8: -1.5}
    s.output_tokens, s.latency_ns = 3, 10
    gen = generation_of(json.loads(s.to_json()))  # the samples file round trip
    assert gen.token_ids == [7, 9, 3] and math.isnan(gen.logprobs[1]) and gen.top[0] == {7: -0.5, 8: -1.5}


def test_both_arms_samples_files_are_read_back_by_the_candidates_test(tmp_path):
    """compare_timed_outputs with no teacher forcing (no request is sent): the records' samples files of both arms,
    a moved run directory resolved under run_dir, a missing reference file a "no data" line."""
    from types import SimpleNamespace

    from harness.measure.prompts import Prompts
    from harness.refcheck.send.timed_check import compare_timed_outputs

    def level(a: str, c: int, rows: list[dict], recorded: str | None = None) -> LongPrefixRecord:
        path = tmp_path / a / f"long_prefix_c{c}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return LongPrefixRecord(run_id="r", arm=a, suite="long_prefix", workload="w", prompts_sha=prompts.fingerprint(),
                                concurrency=c, status="complete", requests=len(rows), failed=0, ttft=Summary.of([]),
                                tpot=Summary.of([]), itl=Summary.of([]), e2e=Summary.of([]), kv_usage=None,
                                gpu_memory_mib=None, samples_path=recorded or str(path))

    prompts = Prompts([1], [[1, 2]], {1: [[1, 3], [1, 4]]})
    live = SimpleNamespace(arm=SimpleNamespace(name="cpu-smoke", parallelism=SimpleNamespace(dcp=1)))
    tokens = list(range(100, 132))
    records = [level("cpu-ref", 1, [row(1, i, tokens) for i in range(2)], "/home/ci/run/cpu-ref/long_prefix_c1.jsonl"),
               level("cpu-smoke", 1, [row(1, 0, tokens), row(1, 1, [5, *tokens[1:]])])]
    run = compare_timed_outputs(live, None, prompts, records, "cpu-ref", tmp_path, forced_requests=0)
    assert run.gaps == [] and [c.exact for c in run.generated] == [True, False]
    assert run.generated[1].first_divergence == 0 and run.forced == [] and run.aborted is None
    assert [json.loads(x)["request"] for x in run.sink.read_text().splitlines()] == ["c1 #0", "c1 #1"]
    assert run.outputs[1] == ("c1 #1", [5, *tokens[1:]], tokens)  # for the degeneration detector
    (tmp_path / "cpu-ref" / "long_prefix_c1.jsonl").unlink()
    gone = compare_timed_outputs(live, None, prompts, records, "cpu-ref", tmp_path, forced_requests=0)
    assert gone.generated == [] and gone.gaps == [
        "no data: cpu-ref c1: samples file /home/ci/run/cpu-ref/long_prefix_c1.jsonl not found"]
