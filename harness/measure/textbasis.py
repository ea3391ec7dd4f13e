"""The text-prompt basis: the harness's token-id prompts sent as text, as real clients send them, so TTFT includes the
server's tokenization of the prompt.

The text is the server's own `/detokenize` of the ids, before any timed request. Random ids do not survive the
re-tokenization, so a text sample's prompt_tokens is the server's count; `canonical` gives ids that do survive it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from harness.measure.http import detokenize, tokenize


@dataclass(frozen=True)
class RoundTrip:
    """Token ids against what their text re-tokenizes to, over a prompt set."""

    prompts: int
    mismatched: int  # prompts whose re-tokenized ids differ from the ids
    tokens: int  # total ids before
    retokenized_tokens: int  # total ids after

    @property
    def mismatch_rate(self) -> float:
        return self.mismatched / self.prompts if self.prompts else 0.0

    def describe(self) -> str:
        return (f"{self.mismatched}/{self.prompts} prompts re-tokenize differently ({self.mismatch_rate:.0%}); "
                f"{self.tokens} tokens -> {self.retokenized_tokens}")


def round_trip(ids: list[list[int]], retokenized: list[list[int]]) -> RoundTrip:
    """Pure: compare each prompt's ids with the ids its text re-tokenized to."""
    if len(ids) != len(retokenized):
        raise ValueError(f"{len(ids)} prompts but {len(retokenized)} re-tokenized")
    return RoundTrip(len(ids), sum(1 for a, b in zip(ids, retokenized, strict=True) if a != b),
                     sum(map(len, ids)), sum(map(len, retokenized)))


async def each(items: list, call: Callable[[httpx.AsyncClient, Any], Awaitable], concurrency: int = 8) -> list:
    """`call(client, item)` for every item, at most `concurrency` at once, results in the items' order."""
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient() as client:
        async def one(item):
            async with gate:
                return await call(client, item)
        return list(await asyncio.gather(*(one(x) for x in items)))


async def to_text(base_url: str, model: str, prompts: list[list[int]]) -> list[str]:
    """Each prompt's text, by the server's tokenizer."""
    return await each(prompts, lambda client, p: detokenize(client, base_url, model, p))


async def to_ids(base_url: str, model: str, texts: list[str]) -> list[list[int]]:
    """Each text's token ids as the server makes them for a completion."""
    return await each(texts, lambda client, t: tokenize(client, base_url, model, t))


@dataclass(frozen=True)
class Canonical:
    """Prompts that are the same as ids and as text: tokenize(text) == ids and detokenize(ids) == text."""

    ids: list[list[int]]
    texts: list[str]
    original: RoundTrip  # the harness's ids -> text -> ids
    canonical: RoundTrip  # canonical ids -> text -> ids (0 mismatches, or the comparison is not of equal prompts)
    texts_stable: int  # canonical ids whose text equals the text they came from


async def canonical(base_url: str, model: str, prompts: list[list[int]]) -> Canonical:
    """ids -> text -> ids' (the server's tokenizer); ids' is checked to round-trip to itself and to the same text."""
    texts = await to_text(base_url, model, prompts)
    ids = await to_ids(base_url, model, texts)
    again = await to_text(base_url, model, ids)
    ids_again = await to_ids(base_url, model, again)
    return Canonical(ids, texts, round_trip(prompts, ids), round_trip(ids, ids_again),
                     sum(1 for a, b in zip(texts, again, strict=True) if a == b))
