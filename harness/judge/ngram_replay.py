"""What vLLM's n-gram drafter must have drafted and had accepted on a given greedy output: its proposer replayed,
step by step, over the prompt and the output tokens (pure).

Under greedy sampling the n-gram drafter is a function of the tokens alone, so an n-gram arm's /metrics counters are
fixed by its outputs: a counter off the replay is a fault, not noise. A last draft past max_tokens is verified but
never streamed, so accepted tokens are a range (at most k per request wide).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def propose(context: Sequence[int], min_n: int, max_n: int, k: int, max_model_len: int) -> list[int]:
    """vLLM's `_find_longest_matched_ngram_and_propose_tokens` (vllm/v1/spec_decode/ngram_proposer.py, 0.25 and
    0.32), line for line: the longest suffix of 1..max_n tokens that occurs earlier (its earliest occurrence among the
    longest), and up to k tokens after it; nothing when the longest is shorter than min_n."""
    total = len(context)
    if total < min_n:
        return []
    k = min(k, max_model_len - total)
    if k <= 0:
        return []
    tokens = list(reversed(context))
    lps = [0] * max_n
    longest, position, prev, i = 0, 0, 0, 1
    while i < total:
        if tokens[prev] == tokens[i]:
            prev += 1
            if prev >= longest:
                longest, position = prev, i
            if i < max_n:
                lps[i] = prev
            if prev == max_n:
                prev = lps[max_n - 1]
            i += 1
        elif prev != 0:
            prev = lps[prev - 1]
        else:
            i += 1
    if longest < min_n:
        return []
    start = total - 1 - position + longest
    return list(context[start:start + min(k, total - start)])


@dataclass
class Replay:
    """Counter values the replayed drafter gives: drafts and draft tokens exactly, accepted tokens (in all and per
    position) as [min, max] where a request's last draft reached past its output."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_min: int = 0
    accepted_max: int = 0
    per_pos_min: list[int] = field(default_factory=list)


def replay_request(prompt: Sequence[int], output: Sequence[int], min_n: int, max_n: int, k: int,
                   max_model_len: int, into: Replay | None = None) -> Replay:
    """One greedy request: the first output token comes from the prefill with no draft; every later step drafts from
    the context so far, keeps the proposed tokens that match the output, and adds one."""
    r = into or Replay(per_pos_min=[0] * k)
    context = list(prompt) + list(output[:1])
    n = 1
    while n < len(output):
        draft = propose(context, min_n, max_n, k, max_model_len)
        if not draft:
            context.append(output[n])
            n += 1
            continue
        r.drafts += 1
        r.draft_tokens += len(draft)
        known = output[n:n + len(draft)]
        accepted = 0
        while accepted < len(known) and draft[accepted] == known[accepted]:
            accepted += 1
        unknown = len(draft) - len(known) if accepted == len(known) else 0  # verified past max_tokens, never streamed
        r.accepted_min += accepted
        r.accepted_max += accepted + unknown
        for pos in range(accepted):
            r.per_pos_min[pos] += 1
        step = min(accepted + 1, len(output) - n)
        context.extend(output[n:n + step])
        n += step
    return r


def replay(requests: Sequence[tuple[Sequence[int], Sequence[int]]], min_n: int, max_n: int, k: int,
           max_model_len: int) -> Replay:
    """Every (prompt ids, output ids) request, summed as the server's counters sum them."""
    total = Replay(per_pos_min=[0] * k)
    for prompt, output in requests:
        replay_request(prompt, output, min_n, max_n, k, max_model_len, total)
    return total


def lookup_bounds(extra: dict) -> tuple[int, int]:
    """(prompt_lookup_min, prompt_lookup_max) as vLLM's SpeculativeConfig resolves them (config/speculative.py,
    0.32): both 5 when neither is set, else the one set stands for the other."""
    lo, hi = extra.get("prompt_lookup_min"), extra.get("prompt_lookup_max")
    if lo is None and hi is None:
        return 5, 5
    return int(lo if lo is not None else hi), int(hi if hi is not None else lo)


def counter_mismatches(arm: str, drafts: float, accepted: float, r: Replay) -> list[str]:
    """Why the measured counters are not the replay's (empty when they are)."""
    out = []
    if drafts != r.drafts:
        out.append(f"{arm} made {drafts:g} drafts; vLLM's n-gram proposer replayed over its outputs makes {r.drafts}")
    if not r.accepted_min <= accepted <= r.accepted_max:
        span = f"{r.accepted_min}" if r.accepted_min == r.accepted_max else f"{r.accepted_min}-{r.accepted_max}"
        out.append(f"{arm} had {accepted:g} draft tokens accepted; the replay over its outputs accepts {span}")
    return out
