"""The one HTTP client of the measurements: OpenAI completions (whole or streamed), the server's /tokenize and
/detokenize, and /metrics, on httpx.

Every failure to get an answer becomes a WorkloadError carrying what the server said; callers decide whether it
ends a check or is counted as a failed request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx

from harness.config.errors import WorkloadError

COMPLETIONS = "/v1/completions"


def failure(url: str, status: int, text: str) -> WorkloadError:
    return WorkloadError(f"request to {url} returned {status}: {text[:500]}")


async def post_json(client: httpx.AsyncClient, base_url: str, path: str, body: dict, timeout_s: float) -> dict:
    """One POST whose answer is JSON (a completion not streamed, /tokenize, /detokenize)."""
    url = base_url + path
    try:
        resp = await client.post(url, json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise WorkloadError(f"request to {url} failed: {exc!r}") from None
    if resp.status_code != 200:
        raise failure(url, resp.status_code, resp.text)
    return resp.json()


async def post_completion(client: httpx.AsyncClient, base_url: str, body: dict, timeout_s: float) -> dict:
    """One completion, not streamed: the response's JSON."""
    return await post_json(client, base_url, COMPLETIONS, body, timeout_s)


async def detokenize(client: httpx.AsyncClient, base_url: str, model: str, tokens: list[int],
                     timeout_s: float = 60.0) -> str:
    """The server's own text for token ids (vLLM's /detokenize)."""
    return (await post_json(client, base_url, "/detokenize", {"model": model, "tokens": tokens}, timeout_s))["prompt"]


async def tokenize(client: httpx.AsyncClient, base_url: str, model: str, text: str,
                   timeout_s: float = 60.0) -> list[int]:
    """The token ids the server makes of a text prompt (vLLM's /tokenize, special tokens as a completion adds them)."""
    return (await post_json(client, base_url, "/tokenize", {"model": model, "prompt": text}, timeout_s))["tokens"]


async def stream_completion(client: httpx.AsyncClient, base_url: str, body: dict,
                            timeout_s: float) -> AsyncIterator[dict]:
    """Each server-sent chunk of a streamed completion, parsed, until [DONE]."""
    url = base_url + COMPLETIONS
    try:
        async with client.stream("POST", url, json=body, timeout=timeout_s) as resp:
            if resp.status_code != 200:
                raise failure(url, resp.status_code, (await resp.aread()).decode(errors="replace"))
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                yield json.loads(payload)
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        raise WorkloadError(f"{type(exc).__name__}: {exc}") from None


def get_metrics(base_url: str, timeout_s: float = 10.0) -> str:
    """The server's Prometheus /metrics text."""
    try:
        resp = httpx.get(f"{base_url}/metrics", timeout=timeout_s)
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise WorkloadError(f"GET {base_url}/metrics failed: {exc!r}") from None
    return resp.text


async def aget_metrics(client: httpx.AsyncClient, base_url: str) -> str:
    """/metrics from inside an event loop; WorkloadError when it cannot be read."""
    try:
        resp = await client.get(f"{base_url}/metrics")
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise WorkloadError(f"GET {base_url}/metrics failed: {exc!r}") from None
    return resp.text
