"""The output-consistency check where outputs are recorded, through the real parsers (loadgen.stream_one,
spec_decode_metrics.stream_generation, generation.generate_one) over an in-process transport: a real vLLM server
streams consistently (the CPU pair's e2e runs exercise that path), so the lies -- a streamed token dropped, a first
chunk with no token, a usage count that disagrees -- come from a small fake stream here."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from harness.config.errors import WorkloadError
from harness.measure.generation import Sampling, generate_one
from harness.measure.loadgen import RequestSample, completion_body, stream_one
from harness.measure.spec_decode_metrics import SpecSample, stream_generation


def choice(tokens: list[int]) -> dict:
    return {"text": "", "logprobs": {"tokens": [f"token_id:{t}" for t in tokens], "token_logprobs": [-0.1] * len(tokens),
                                     "top_logprobs": [{f"token_id:{t}": -0.1} for t in tokens]}}


def sse(chunks: list[list[int]], reported: int) -> bytes:
    lines = [json.dumps({"choices": [choice(c)]}) for c in chunks]
    lines.append(json.dumps({"choices": [], "usage": {"completion_tokens": reported, "prompt_tokens": 3}}))
    return "".join(f"data: {x}\n\n" for x in [*lines, "[DONE]"]).encode()


def client_of(body: bytes, content_type: str = "text/event-stream") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"content-type": content_type})))


def streamed(chunks: list[list[int]], reported: int) -> RequestSample:
    async def go():
        async with client_of(sse(chunks, reported)) as c:
            return await stream_one(c, "http://fake", completion_body("m", [1, 2, 3], 4), RequestSample(1, 0, 3), 5)
    return asyncio.run(go())


def test_a_consistent_stream_records_its_first_chunk_and_passes():
    s = streamed([[5], [6, 7], [8]], 4)
    assert s.error is None and s.token_ids == [5, 6, 7, 8] and s.first_tokens == [5]


@pytest.mark.parametrize(("chunks", "why"), [
    ([[5], [6], [8]], "the server reported 4 completion tokens but the output carries 3"),
    ([[], [5], [6, 7], [8]], "the first streamed chunk (the one the first-token time was taken at) carried no token"),
])
def test_an_inconsistent_stream_fails_the_request_with_the_reason(chunks, why):
    s = streamed(chunks, 4)
    assert s.error == f"inconsistent output: {why}" and not s.ok


def test_the_speculative_stream_is_checked_too():
    async def go(chunks, reported):
        body = {"max_tokens": 4, "stream": True}
        async with client_of(sse(chunks, reported)) as c:
            return await stream_generation(c, "http://fake", body, SpecSample("p", "k"), 5)
    good = asyncio.run(go([[5, 6, 7], [8]], 4))
    assert good.error is None and good.first_tokens == [5, 6, 7]
    bad = asyncio.run(go([[], [5, 6, 7, 8]], 4))
    assert bad.error == ("inconsistent output: the first streamed chunk (the one the first-token time was taken at) "
                         "carried no token")


def test_a_compared_output_whose_usage_disagrees_is_refused():
    def body(reported: int) -> bytes:
        return json.dumps({"choices": [choice([5, 6, 7])], "usage": {"completion_tokens": reported}}).encode()

    async def go(reported):
        async with client_of(body(reported), "application/json") as c:
            return await generate_one(c, "http://fake", "m", [1, 2], Sampling(3, 1), 5)
    assert asyncio.run(go(3)).token_ids == [5, 6, 7]
    with pytest.raises(WorkloadError, match="inconsistent output: the server reported 4 completion tokens but the "
                                            "output carries 3"):
        asyncio.run(go(4))
