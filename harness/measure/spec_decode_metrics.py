"""The spec_decode suite's measurement (I/O): fixed GSM8K-style text prompts sent one at a time, streamed, greedy;
per request the tokens, logprobs, text and timings; the server's spec-decode counters read from /metrics.

One request at a time: every arm decodes each prompt alone, so TPOT compares the drafter's effect and nothing else,
and the per-request outputs are what the reference arm computes alone too.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from harness.config.errors import WorkloadError
from harness.config.workloads import SpecDecodeWorkload
from harness.judge.output_consistency import inconsistency
from harness.measure.generation import Generation, parse_choice
from harness.measure.http import stream_completion
from harness.measure.metrics import samples
from harness.records.jsonl import append_line
from harness.records.schema import Summary

NS = 1e-9
# vLLM's SpecDecodingProm (vllm/v1/spec_decode/metrics.py, 0.25 and 0.32): Prometheus counters, exported with _total.
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"  # label "position", 0-based


@dataclass(frozen=True)
class SpecPrompt:
    id: str
    text: str
    kind: str  # "gsm8k" or "long context"


def example(row: dict) -> str:
    return f"Question: {row['question']}\nAnswer: {row['answer']}\n\n"


def build_spec_prompts(w: SpecDecodeWorkload, train: list[dict], test: list[dict]) -> list[SpecPrompt]:
    """Pure: worked train examples, then a test question; the same rows give the same prompts on every arm."""
    out = []
    for i in range(w.gsm8k_prompts):
        shots = "".join(example(r) for r in train[:w.gsm8k_shots])
        out.append(SpecPrompt(f"gsm8k-{i}", f"{shots}Question: {test[i]['question']}\nAnswer:", "gsm8k"))
    for j in range(w.long_context_prompts):
        q = test[w.gsm8k_prompts + j]
        start = w.gsm8k_shots + j * w.long_context_shots
        shots = "".join(example(r) for r in train[start:start + w.long_context_shots])
        out.append(SpecPrompt(f"long-{j}", f"{shots}Question: {q['question']}\nAnswer:", "long context"))
    return out


def read_rows(path: Path, n: int) -> list[dict]:
    rows = []
    with path.open() as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
            if len(rows) >= n:
                break
    if len(rows) < n:
        raise WorkloadError(f"{path} has {len(rows)} rows; the spec_decode workload needs {n}")
    return rows


def load_spec_prompts(w: SpecDecodeWorkload, data_dir: Path) -> list[SpecPrompt]:
    train = read_rows(data_dir / "train.jsonl", w.gsm8k_shots + w.long_context_prompts * w.long_context_shots)
    return build_spec_prompts(w, train, read_rows(data_dir / "test.jsonl", w.prompts))


def prompts_sha(prompts: list[SpecPrompt]) -> str:
    return hashlib.sha256(json.dumps([[p.id, p.text] for p in prompts]).encode()).hexdigest()[:16]


@dataclass
class SpecSample:
    """One streamed greedy request: what it generated and when."""

    id: str
    kind: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[dict[int, float]] = field(default_factory=list)
    text: str = ""
    ttft_s: float | None = None
    latency_s: float | None = None
    output_tokens: int | None = None  # from the usage block
    error: str | None = None
    prompt_token_ids: list[int] = field(default_factory=list)  # as the server tokenised the prompt (return_token_ids)
    first_tokens: list[int] | None = None  # the token ids of the chunk TTFT was timed at (output consistency)

    @property
    def tpot_s(self) -> float | None:
        if self.error or self.ttft_s is None or self.latency_s is None or not self.output_tokens \
                or self.output_tokens < 2:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)

    def generation(self) -> Generation:
        return Generation(self.token_ids, self.logprobs, self.top)

    def to_json(self) -> str:
        d = asdict(self)
        d["top"] = [{str(k): v for k, v in t.items()} for t in self.top]
        return json.dumps({**d, "tpot_s": self.tpot_s})

    @classmethod
    def from_json(cls, line: str) -> SpecSample:
        d = json.loads(line)
        d.pop("tpot_s", None)
        d["top"] = [{int(k): float(v) for k, v in t.items()} for t in d.get("top", [])]
        return cls(**d)


def request_body(model: str, prompt: str, w: SpecDecodeWorkload) -> dict:
    return {"model": model, "prompt": prompt, "max_tokens": w.output_tokens, "temperature": 0.0, "ignore_eos": True,
            "logprobs": w.top_logprobs, "return_tokens_as_token_ids": True, "return_token_ids": True, "stream": True,
            "stream_options": {"include_usage": True}}


async def stream_generation(client: httpx.AsyncClient, base_url: str, body: dict, sample: SpecSample,
                            timeout_s: float) -> SpecSample:
    """Tokens, logprobs and text chunk by chunk (one chunk may carry several accepted tokens); a failure is kept
    in the sample, never raised."""
    t0 = time.perf_counter_ns()
    try:
        async for data in stream_completion(client, base_url, body, timeout_s):
            if data.get("choices"):
                choice = data["choices"][0]
                part = parse_choice(choice)
                if sample.ttft_s is None:
                    sample.ttft_s = (time.perf_counter_ns() - t0) * NS
                    sample.first_tokens = list(part.token_ids)
                sample.prompt_token_ids += choice.get("prompt_token_ids") or []  # the first chunk's only
                sample.token_ids += part.token_ids
                sample.logprobs += part.logprobs
                sample.top += part.top
                sample.text += choice.get("text") or ""
            if data.get("usage"):
                sample.output_tokens = data["usage"].get("completion_tokens")
    except WorkloadError as exc:
        sample.error = str(exc)
        return sample
    sample.latency_s = (time.perf_counter_ns() - t0) * NS
    if sample.output_tokens != body["max_tokens"] or len(sample.token_ids) != body["max_tokens"]:
        sample.error = (f"{sample.output_tokens} output tokens in the usage block, {len(sample.token_ids)} streamed; "
                        f"expected {body['max_tokens']} (ignore_eos)")
    elif why := inconsistency(sample.token_ids, sample.output_tokens, sample.first_tokens):
        sample.error = f"inconsistent output: {why}"
    return sample


async def run_prompts(base_url: str, model: str, prompts: list[SpecPrompt], w: SpecDecodeWorkload,
                      timeout_s: float, alive: Callable[[], None], sink: Path) -> tuple[list[SpecSample], str | None]:
    """Every prompt, one at a time, each sample appended to `sink` as it ends; (samples, why it stopped early)."""
    sink.parent.mkdir(parents=True, exist_ok=True)
    out: list[SpecSample] = []
    async with httpx.AsyncClient() as client:
        for p in prompts:
            try:
                alive()
            except Exception as exc:  # noqa: BLE001 - any failure of the check means the server is gone
                return out, str(exc)
            sample = await stream_generation(client, base_url, request_body(model, p.text, w), SpecSample(p.id, p.kind),
                                             timeout_s)
            out.append(sample)
            append_line(sink, sample.to_json())
    return out, None


def acceptance_length(drafts: float | None, accepted: float | None) -> float | None:
    """vLLM's convention (SpecDecodingLogging): the bonus token counts, so 1 + accepted / drafts."""
    if not drafts or accepted is None:
        return None
    return 1 + accepted / drafts


def position_rates(per_pos: list[float], drafts: float | None) -> list[float]:
    return [v / drafts for v in per_pos] if drafts else []


@dataclass(frozen=True)
class SpecCounters:
    """The server's cumulative spec-decode counters (summed over engines)."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: dict[int, float]

    def minus(self, before: SpecCounters) -> SpecCounters:
        return SpecCounters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                            self.accepted - before.accepted,
                            {p: v - before.accepted_per_pos.get(p, 0.0) for p, v in self.accepted_per_pos.items()})


def spec_counters(metrics_text: str) -> SpecCounters | None:
    """Pure: None when the server exports no spec-decode counters (speculative decoding is off)."""
    totals = {}
    for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
        found = samples(metrics_text, name)
        if not found:
            return None
        totals[name] = sum(v for _, v in found)
    per_pos: dict[int, float] = {}
    for labels, value in samples(metrics_text, ACCEPTED_PER_POS):
        pos = int(labels.get("position", -1))
        per_pos[pos] = per_pos.get(pos, 0.0) + value
    return SpecCounters(totals[DRAFTS], totals[DRAFT_TOKENS], totals[ACCEPTED], dict(sorted(per_pos.items())))


def read_samples(path: Path) -> list[SpecSample]:
    return [SpecSample.from_json(line) for line in path.read_text().splitlines() if line.strip()]


def timing_fields(samples_: list[SpecSample]) -> dict:
    """A SpecDecodeRecord's request counts and timings from its samples."""
    ok = [s for s in samples_ if not s.error]
    latency = sum(s.latency_s or 0.0 for s in ok)
    tokens = sum(s.output_tokens or 0 for s in ok)
    return {"requests": len(samples_), "failed": len(samples_) - len(ok),
            "errors": [f"{s.id}: {s.error}" for s in samples_ if s.error],
            "ttft": Summary.of([s.ttft_s for s in ok if s.ttft_s is not None]),
            "tpot": Summary.of([s.tpot_s for s in ok if s.tpot_s is not None]),
            "tokens_per_s": tokens / latency if latency else None}
