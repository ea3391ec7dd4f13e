"""Teacher forcing (pure): request body, parsing vLLM's prompt_logprobs, per-position comparison, DCP path count."""

import math

import pytest

from harness.judge.drift_floor import per_position, per_request
from harness.measure.generation import Generation, parse_scores, scoring_body
from harness.refcheck.judging.teacher_forcing import chunk_sizes, compare_forced, decode_path_positions


def test_body_sends_prompt_plus_reference_tokens_as_ids_with_prompt_logprobs():
    body = scoring_body("m", [5, 6, 7], [8, 9])
    assert body["prompt"] == [5, 6, 7, 8, 9] and body["max_tokens"] == 1 and body["prompt_logprobs"] == 1
    assert body["temperature"] == 0.0 and "logprobs" not in body


def lp(logprob, rank):
    return {"logprob": logprob, "rank": rank, "decoded_token": "x"}


# vLLM 0.25.0 completions: choices[0].prompt_logprobs = [None, {id: Logprob}, ...] (keys JSON strings)
CHOICE = {"prompt_logprobs": [None, {"6": lp(-1.0, 1)}, {"7": lp(-2.0, 3), "4": lp(-0.5, 1)},
                              {"8": lp(-0.25, 1)}, {"9": lp(-3.0, 2), "token_id:11": lp(-0.1, 1)}]}


def test_parse_takes_each_reference_tokens_logprob_and_the_candidates_top():
    g = parse_scores(CHOICE, 3, [8, 9])
    assert g.token_ids == [8, 9] and g.logprobs == [-0.25, -3.0]
    assert g.top[1] == {9: -3.0, 11: -0.1}


def test_parse_refuses_a_response_without_or_with_short_prompt_logprobs():
    with pytest.raises(ValueError, match="no prompt_logprobs"):
        parse_scores({"prompt_logprobs": None}, 3, [8, 9])
    with pytest.raises(ValueError, match="4 entries for a 5-token"):
        parse_scores({"prompt_logprobs": CHOICE["prompt_logprobs"][:4]}, 3, [8, 9])


def ref(tokens, logprobs, gaps=None):
    tops = [{t: lp_, t + 1000: lp_ - (gaps[i] if gaps else 5.0)} for i, (t, lp_) in enumerate(zip(tokens, logprobs, strict=True))]
    return Generation(tokens, logprobs, tops)


def test_every_position_is_compared_even_after_the_candidates_argmax_differs():
    r = ref([1, 2, 3, 4], [-0.1, -0.2, -0.3, -0.4], gaps=[5, 0.1, 5, 5])
    cand = Generation([1, 2, 3, 4], [-0.1, -0.9, -0.35, -0.4],
                      [{1: -0.1}, {2: -0.9, 99: -0.5}, {3: -0.35}, {4: -0.4}])
    c = compare_forced("r0", 100, cand, r, "round 0")
    assert not c.exact and c.first_divergence == 1 and c.reference_gap_at_divergence == pytest.approx(0.1)
    assert c.deltas == pytest.approx([0.0, 0.7, 0.05, 0.0]) and c.max_drift == pytest.approx(0.7)
    assert c.mean_drift == pytest.approx(0.1875) and c.candidate_tokens == c.reference_tokens == 4 and c.finite


def test_identical_scores_are_exact_with_zero_drift_and_nan_is_not_finite():
    r = ref([1, 2], [-0.1, -0.2])
    same = Generation([1, 2], [-0.1, -0.2], [{1: -0.1}, {2: -0.2}])
    c = compare_forced("r", 10, same, r)
    assert c.exact and c.max_drift == 0 and c.mean_drift == 0
    bad = compare_forced("r", 10, Generation([1, 2], [-0.1, math.nan], [{1: -0.1}, {}]), r)
    assert not bad.finite and bad.max_drift == math.inf


def test_chunking_and_the_positions_that_run_the_dcp_decode_path():
    assert chunk_sizes(20000, 8192) == [8192, 8192, 3616] and chunk_sizes(8192, 8192) == [8192]
    # 300-token prompt + 64 scored: one 364-token chunk <= 512 -> every scored query on the decode path
    assert decode_path_positions(300, 64, 8192) == 64
    # 1000 + 64: one 1064-token chunk -> MLA prefill path (KV all-gather, no LSE combine)
    assert decode_path_positions(1000, 64, 8192) == 0
    # 8400 + 64: chunks 8192 | 272: queries 8399..8462 all in the last, short chunk
    assert decode_path_positions(8400, 64, 8192) == 64
    # 8150 + 64: queries 8149..8212; 8149..8191 sit in the first 8192-token chunk, 8192..8212 in the 22-token last one
    assert decode_path_positions(8150, 64, 8192) == 21
    assert decode_path_positions(300, 64, None) == 0


def test_keys_for_the_paired_floor_test():
    r = ref([1, 2], [-0.1, -0.2])
    c = compare_forced("a", 10, Generation([1, 2], [-0.1, -0.3], [{1: -0.1}, {2: -0.3}]), r)
    assert per_request([c]) == {"a": pytest.approx(0.1)} and per_request([c], "mean_drift") == {"a": pytest.approx(0.05)}
    assert per_position([c]) == {"a/0": 0.0, "a/1": pytest.approx(0.1)}
