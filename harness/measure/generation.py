"""Greedy generations with token ids and top-k logprobs: what the reference checks compare.

A Generation is plain data (JSON round-trip for the reference store). The HTTP edge asks vLLM's completions API
for token ids instead of strings (`return_tokens_as_token_ids`), so two arms are compared id by id, never by
detokenised text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from harness.config.errors import WorkloadError
from harness.judge.output_consistency import inconsistency
from harness.measure.http import post_completion


@dataclass(frozen=True)
class Sampling:
    """Greedy, fixed length: the sampling parameters that are part of a reference key."""

    max_tokens: int
    top_logprobs: int

    def body(self, model: str, prompt: list[int] | str, cache_salt: str | None = None) -> dict:
        body = {"model": model, "prompt": prompt, "max_tokens": self.max_tokens, "temperature": 0.0,
                "ignore_eos": True, "logprobs": self.top_logprobs, "return_tokens_as_token_ids": True}
        if cache_salt:
            body["cache_salt"] = cache_salt  # its own prefix-cache namespace: no block of another request is reused
        return body


@dataclass(frozen=True)
class Generation:
    token_ids: list[int]
    logprobs: list[float]  # of the chosen token, per position
    top: list[dict[int, float]]  # top-k per position

    def to_json(self) -> dict:
        return {"token_ids": self.token_ids, "logprobs": self.logprobs,
                "top": [{str(k): v for k, v in t.items()} for t in self.top]}

    @classmethod
    def from_json(cls, data: dict) -> Generation:
        return cls(list(data["token_ids"]), [float(x) for x in data["logprobs"]],
                   [{int(k): float(v) for k, v in t.items()} for t in data["top"]])


def token_id(text: str) -> int:
    """vLLM writes a token as 'token_id:123' when return_tokens_as_token_ids is set."""
    prefix, _, number = text.rpartition(":")
    if prefix != "token_id" or not number.lstrip("-").isdigit():
        raise WorkloadError(f"expected a token as 'token_id:<n>', got {text!r}: the server ignored "
                            "return_tokens_as_token_ids (vLLM too old?)")
    return int(number)


def _float(x) -> float:
    # JSON has no -inf/NaN: vLLM sends them as strings or null; keep them non-finite so the check sees them.
    if x is None:
        return float("nan")
    return float(x)


def parse_choice(choice: dict) -> Generation:
    lp = choice.get("logprobs") or {}
    tokens = lp.get("tokens") or []
    return Generation([token_id(t) for t in tokens], [_float(x) for x in lp.get("token_logprobs") or []],
                      [{token_id(k): _float(v) for k, v in (t or {}).items()} for t in lp.get("top_logprobs") or []])


async def generate_one(client: httpx.AsyncClient, base_url: str, model: str, prompt: list[int],
                       sampling: Sampling, timeout_s: float, cache_salt: str | None = None) -> Generation:
    """One greedy output; WorkloadError where the response disagrees with itself (its usage.completion_tokens is not
    the tokens it carries): an output compared with the reference must be the one the server counted."""
    data = await post_completion(client, base_url, sampling.body(model, prompt, cache_salt), timeout_s)
    gen = parse_choice(data["choices"][0])
    if why := inconsistency(gen.token_ids, (data.get("usage") or {}).get("completion_tokens")):
        raise WorkloadError(f"request to {base_url}: inconsistent output: {why}")
    return gen


async def generate_batch(base_url: str, model: str, prompts: list[list[int]], sampling: Sampling,
                         timeout_s: float, alive: Callable[[], None] | None = None,
                         cache_salt: str | None = None) -> list[Generation]:
    """All prompts in flight at once (one decode batch); raises WorkloadError/LaunchError on the first failure."""
    async with httpx.AsyncClient() as client:
        tasks = [asyncio.ensure_future(generate_one(client, base_url, model, p, sampling, timeout_s, cache_salt))
                 for p in prompts]
        try:
            while True:
                # the first failure as soon as seen: reading in order hits a request still in flight (docs/suites.md)
                failed = next((t for t in tasks if t.done() and t.exception() is not None), None)
                if failed is not None:
                    raise failed.exception()
                if all(t.done() for t in tasks):
                    return [t.result() for t in tasks]
                await asyncio.wait(tasks, timeout=0.5, return_when=asyncio.FIRST_EXCEPTION)
                if alive is not None:
                    alive()  # a dead engine raises here instead of waiting out the request timeout
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def scoring_body(model: str, prompt: Sequence[int], reference_tokens: Sequence[int], top: int = 1) -> dict:
    """Completions request: prompt + reference output, scored with prompt_logprobs, one throw-away output token."""
    return {"model": model, "prompt": [*prompt, *reference_tokens], "max_tokens": 1, "temperature": 0.0,
            "prompt_logprobs": top, "return_tokens_as_token_ids": True}


def _prompt_logprob(entry) -> float:
    lp = entry.get("logprob") if isinstance(entry, dict) else entry
    return float("nan") if lp is None else float(lp)


def parse_scores(choice: dict, prompt_len: int, reference_tokens: Sequence[int]) -> Generation:
    """Per reference position: the candidate's logprob of the reference token, and its top entries."""
    plp = choice.get("prompt_logprobs")
    if plp is None:
        raise ValueError("response has no prompt_logprobs: the server ignored the field")
    if len(plp) != prompt_len + len(reference_tokens):
        raise ValueError(f"prompt_logprobs has {len(plp)} entries for a {prompt_len + len(reference_tokens)}-token "
                         "prompt")
    chosen, tops = [], []
    for j, tok in enumerate(reference_tokens):
        entry = plp[prompt_len + j] or {}
        # keys are token ids as strings ("123") or, with return_tokens_as_token_ids in some versions, "token_id:123"
        table = {(int(k) if str(k).lstrip("-").isdigit() else token_id(str(k))): _prompt_logprob(v)
                 for k, v in entry.items()}
        chosen.append(table.get(tok, float("nan")))
        tops.append(table)
    return Generation(list(reference_tokens), chosen, tops)


async def score_forced(base_url: str, model: str, prompt: list[int], reference_tokens: list[int],
                       timeout_s: float) -> Generation:
    """Teacher forcing: the candidate's logprob of each reference token (refcheck/judging/teacher_forcing.py)."""
    async with httpx.AsyncClient() as client:
        try:
            resp = await client.post(f"{base_url}/v1/completions", json=scoring_body(model, prompt, reference_tokens),
                                     timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise WorkloadError(f"scoring request to {base_url} failed: {exc!r}") from None
    if resp.status_code != 200:
        raise WorkloadError(f"scoring request to {base_url} returned {resp.status_code}: {resp.text[:300]}")
    try:
        return parse_scores(resp.json()["choices"][0], len(prompt), reference_tokens)
    except (ValueError, KeyError, IndexError) as exc:
        raise WorkloadError(f"scoring response from {base_url} unusable: {exc}") from None
