"""Minimal OpenAI-completions client for greedy probes (the streaming load client is separate)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from harness.config.errors import WorkloadError


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    completion_tokens: int


def complete(base_url: str, model: str, prompt: str | list[int], max_tokens: int, logprobs: int = 0,
             timeout_s: float = 120.0) -> Completion:
    """One greedy completion; HTTP and server errors become a WorkloadError with the response text."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0}
    if logprobs:
        body["logprobs"] = logprobs
    try:
        resp = httpx.post(f"{base_url}/v1/completions", json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise WorkloadError(f"completion request to {base_url} failed: {exc!r}") from None
    if resp.status_code != 200:
        raise WorkloadError(f"completion request to {base_url} returned {resp.status_code}: {resp.text[:500]}")
    data = resp.json()
    choice = data["choices"][0]
    lp = choice.get("logprobs") or {}
    return Completion(choice["text"], lp.get("tokens") or [], lp.get("token_logprobs") or [],
                      lp.get("top_logprobs") or [], data["usage"]["completion_tokens"])


def top_gaps(completion: Completion) -> list[float]:
    """Top-1 minus top-2 log-probability at every generated position that reports two candidates."""
    gaps = []
    for top in completion.top_logprobs:
        values = sorted(top.values(), reverse=True)
        if len(values) >= 2:
            gaps.append(values[0] - values[1])
    return gaps
