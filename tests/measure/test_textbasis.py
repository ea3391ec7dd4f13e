"""The text-prompt basis: the round-trip arithmetic (the server's /tokenize and /detokenize run in the e2e test and
benchmarks/long_prefix_vs_vllm_bench.py)."""

import pytest

from harness.measure.textbasis import round_trip


def test_round_trip_counts_prompts_that_re_tokenize_differently():
    rt = round_trip([[5, 6, 7], [8, 9], [10]], [[5, 6, 7], [8, 4, 4], [10]])
    assert (rt.prompts, rt.mismatched, rt.tokens, rt.retokenized_tokens) == (3, 1, 6, 7)
    assert abs(rt.mismatch_rate - 1 / 3) < 1e-12
    assert rt.describe() == "1/3 prompts re-tokenize differently (33%); 6 tokens -> 7"


def test_round_trip_of_nothing_and_of_unequal_sets():
    assert round_trip([], []).mismatch_rate == 0.0
    with pytest.raises(ValueError, match="2 prompts but 1"):
        round_trip([[1], [2]], [[1]])
