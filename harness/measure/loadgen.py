"""Async streaming load client: one request = one RequestSample with monotonic-ns chunk timestamps.

TPOT follows `vllm bench serve` (token chunks, usage-block token counts); a buffered stream has no TPOT or ITL. Each
sample keeps its output ids with logprobs and top-2, so a speed figure counts only on outputs that match the
reference's (both arms pay the same logprob cost). A watcher aborts the level when the server dies.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from harness.config.errors import WorkloadError
from harness.judge.output_consistency import inconsistency
from harness.measure.generation import parse_choice
from harness.measure.http import stream_completion
from harness.records.jsonl import append_line

if TYPE_CHECKING:
    from harness.serve.launch import LiveServer

NS = 1e-9


BURST_GAP_NS = 100_000  # 0.1 ms between two token chunks: a burst, not a decode step
TOP_LOGPROBS = 2  # the top-2 gap at a divergence tells a near-tie flip from a wrong computation


@dataclass
class RequestSample:
    level: int  # concurrency level (0 for warm-up)
    index: int
    prompt_tokens: int | None  # token ids: their count; text: None until the usage block says what the server counted
    start_ns: int = 0
    ttft_ns: int | None = None
    latency_ns: int | None = None
    output_tokens: int | None = None  # from the usage block
    chunk_offsets_ns: list[int] = field(default_factory=list)  # per chunk with choices, since start
    error: str | None = None
    # The generated tokens, as the chunks carried them (what the output comparison with the reference reads back
    # from the samples file): ids, the chosen token's logprob, and the top-2 {id: logprob} per position.
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    top: list[dict[int, float]] = field(default_factory=list)
    first_tokens: list[int] | None = None  # the token ids of the chunk TTFT was timed at (output consistency)

    @property
    def ok(self) -> bool:
        return self.error is None and self.latency_ns is not None

    @property
    def ttft_s(self) -> float | None:
        return self.ttft_ns * NS if self.ttft_ns is not None else None

    @property
    def raw_tpot_ns(self) -> float | None:
        """(last token chunk - first) / (output tokens - 1), as `vllm bench serve` computes it, buffered or not."""
        if not self.ok or self.ttft_ns is None or not self.output_tokens or self.output_tokens < 2:
            return None
        last = self.chunk_offsets_ns[-1] if self.chunk_offsets_ns else self.latency_ns
        return (last - self.ttft_ns) / (self.output_tokens - 1)

    @property
    def buffered(self) -> bool:
        """Its 2+ output tokens reached the client at once: the mean gap between token chunks is under BURST_GAP_NS,
        or one chunk carried them all. Per chunk, not per token, as a speculative step carries several tokens
        (docs/suites.md, "Measurement details, measured")."""
        offs = self.chunk_offsets_ns
        if not self.ok or not offs or not self.output_tokens or self.output_tokens < 2:
            return False
        return len(offs) == 1 or (offs[-1] - offs[0]) / (len(offs) - 1) < BURST_GAP_NS

    @property
    def tpot_s(self) -> float | None:
        raw = self.raw_tpot_ns
        return None if raw is None or self.buffered else raw * NS

    @property
    def bursty(self) -> bool:
        """At least half its chunk gaps are under BURST_GAP_NS: the stream timed scheduling, not the model's decode."""
        gaps = [b - a for a, b in zip(self.chunk_offsets_ns, self.chunk_offsets_ns[1:], strict=False)]
        return bool(gaps) and 2 * sum(g < BURST_GAP_NS for g in gaps) >= len(gaps)

    @property
    def itl_s(self) -> list[float]:
        if self.buffered:  # gaps of the delivery, not of the decode
            return []
        offs = self.chunk_offsets_ns
        return [(b - a) * NS for a, b in zip(offs, offs[1:], strict=False)]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "tpot_s": self.tpot_s, "ttft_s": self.ttft_s, "buffered": self.buffered})


def completion_body(model: str, prompt: list[int] | str, max_tokens: int, extra: dict | None = None) -> dict:
    """Greedy, ignore_eos, streamed with usage and the output tokens as ids with top-2 logprobs; `extra` adds fields
    (e.g. a benchmark's cache_salt)."""
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, "logprobs": TOP_LOGPROBS,
            "return_tokens_as_token_ids": True, **(extra or {})}


def keep_tokens(sample: RequestSample, choice: dict) -> None:
    """Append one chunk's tokens to the sample (parsed per chunk: the stream is never held whole); the first chunk's
    are kept apart too, as the tokens its TTFT timed."""
    gen = parse_choice(choice)
    if sample.first_tokens is None:
        sample.first_tokens = list(gen.token_ids)
    sample.token_ids += gen.token_ids
    sample.logprobs += [x if x == x else None for x in gen.logprobs]  # NaN (JSON null) back to None
    sample.top += gen.top


async def stream_one(client: httpx.AsyncClient, base_url: str, body: dict, sample: RequestSample,
                     timeout_s: float) -> RequestSample:
    """One streamed request: chunk times since its start, output tokens from the usage block; a failure is kept
    in the sample, never raised."""
    sample.start_ns = time.perf_counter_ns()
    try:
        async for data in stream_completion(client, base_url, body, timeout_s):
            now = time.perf_counter_ns() - sample.start_ns
            if data.get("choices"):
                if sample.ttft_ns is None:
                    sample.ttft_ns = now
                sample.chunk_offsets_ns.append(now)
                keep_tokens(sample, data["choices"][0])
            if data.get("usage"):
                sample.output_tokens = data["usage"].get("completion_tokens")
                sample.prompt_tokens = data["usage"].get("prompt_tokens", sample.prompt_tokens)
    except WorkloadError as exc:
        sample.error = str(exc)
        return sample
    sample.latency_ns = time.perf_counter_ns() - sample.start_ns
    if sample.output_tokens is None:
        sample.error = "stream ended without a usage block"
    elif sample.output_tokens != body["max_tokens"]:
        sample.error = f"{sample.output_tokens} output tokens, expected {body['max_tokens']} (ignore_eos)"
    elif body.get("logprobs") is not None and (why := inconsistency(sample.token_ids, sample.output_tokens,
                                                                    sample.first_tokens)):
        sample.error = f"inconsistent output: {why}"  # its timing and its output count for nothing
    return sample


@dataclass
class LevelSamples:
    """One level's requests as they ended, and the window they were sent in."""
    samples: list[RequestSample]
    aborted: str | None  # why the level stopped early (server death), else None
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Endpoint:
    """The server a level's requests go to: its URL, the model name it serves, each request's timeout and the
    liveness check the watcher polls (it raises once the server is gone)."""
    base_url: str
    model: str
    timeout_s: float
    alive: Callable[[], None]

    @classmethod
    def of(cls, live: LiveServer) -> Endpoint:
        return cls(live.info.base_url, live.arm.model.served_name, live.arm.timeouts.request_s,
                   live.server.check_alive)


async def watch(alive: Callable[[], None], interval_s: float = 0.5) -> str:
    """Return the death message as soon as `alive()` raises."""
    while True:
        try:
            alive()
        except Exception as exc:  # noqa: BLE001 - any failure of the check means the server is gone
            return str(exc)
        await asyncio.sleep(interval_s)


async def run_level(to: Endpoint, prompts: list[list[int]] | list[str], output_tokens: int, concurrency: int,
                    level: int, sink: Path | None = None, on_done: Callable[[], object] | None = None,
                    extra: dict | None = None) -> LevelSamples:
    """Send `prompts` (token ids or text) to `to` with at most `concurrency` in flight; every sample is appended to
    `sink` as it ends."""
    gate = asyncio.Semaphore(concurrency)
    samples: list[RequestSample] = []
    limits = httpx.Limits(max_connections=concurrency + 1, max_keepalive_connections=concurrency + 1)

    async with httpx.AsyncClient(limits=limits) as client:
        async def one(i: int, prompt: list[int] | str) -> None:
            async with gate:
                sample = RequestSample(level, i, None if isinstance(prompt, str) else len(prompt))
                body = completion_body(to.model, prompt, output_tokens, extra)
                await stream_one(client, to.base_url, body, sample, to.timeout_s)
                samples.append(sample)
                if sink is not None:
                    append_line(sink, sample.to_json())
                if on_done is not None:
                    on_done()

        t0 = time.perf_counter_ns()
        work = asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
        watcher = asyncio.ensure_future(watch(to.alive))
        done, _ = await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        aborted = None
        if watcher in done:
            aborted = watcher.result()
            work.cancel()
            try:
                await work
            except asyncio.CancelledError:
                pass
        else:
            watcher.cancel()
            await work
            # Requests to a dead server fail fast, often before the watcher's next poll: check once more.
            try:
                to.alive()
            except Exception as exc:  # noqa: BLE001
                aborted = str(exc)
        return LevelSamples(sorted(samples, key=lambda s: s.index), aborted, t0, time.perf_counter_ns())
