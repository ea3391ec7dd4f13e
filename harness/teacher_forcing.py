"""Teacher forcing (pure): score the reference's own generated tokens on the candidate, position by position.

The candidate gets prompt + the reference's output tokens as one token-id prompt with `prompt_logprobs` and
`max_tokens: 1`; each reference token's logprob under the candidate is then compared with the reference's own
logprob of it. Unlike free generation, one early divergence does not end the comparison: every position is
conditioned on the same text on both arms.

Which attention path scores the positions, in vLLM 0.25.0 (read from its source):
- A request with `prompt_logprobs` never reads the prefix cache (SamplingParams sets skip_reading_prefix_cache;
  the completions API does not expose it), so the whole prompt is prefilled from scratch, in chunks of at most
  `--max-num-batched-tokens` when sent alone.
- FLASH_ATTN_MLA has reorder_batch_threshold 512 and, with interleave 1, supports DCP with varlen queries: a chunk
  of <= 512 query tokens runs the *decode* path (forward_mqa: queries all-gathered over the DCP ranks, attention
  over each rank's KV shard, LSE-weighted combine). Longer chunks run the MLA prefill path, which under DCP
  all-gathers the context's KV (cp_gather_cache + all_gather + reorg_kvcache) and runs ordinary attention on every
  rank: the LSE combine across DCP ranks is not involved there.
So the scored positions see the DCP combine only where their chunk is <= 512 tokens; `decode_path_positions`
counts them, and the GPU prompt set chooses lengths whose last chunk holds every scored position.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.compare import top_gap
from harness.generation import Generation, token_id
from harness.results import RequestComparison

DECODE_QUERY_THRESHOLD = 512  # FLASH_ATTN_MLA reorder_batch_threshold in vLLM 0.25.0


class TeacherForcedComparison(RequestComparison):
    """A RequestComparison over every scored position (max_drift over all of them; `exact`: the reference token is
    the candidate's argmax everywhere; first_divergence: the first position where it is not), plus the per-position
    deltas the paired floor test needs."""

    deltas: list[float] = []  # |candidate logprob - reference logprob| of the reference token, per position
    mean_drift: float | None = None
    decode_path_positions: int = 0  # scored positions whose chunk ran the DCP decode path (<= 512 query tokens)


def scoring_body(model: str, prompt: Sequence[int], reference_tokens: Sequence[int], top: int = 1) -> dict:
    """Completions request: prompt + reference output, scored with prompt_logprobs, one throw-away output token."""
    return {"model": model, "prompt": [*prompt, *reference_tokens], "max_tokens": 1, "temperature": 0.0,
            "prompt_logprobs": top, "return_tokens_as_token_ids": True}


def _value(entry) -> float:
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
        table = {(int(k) if str(k).lstrip("-").isdigit() else token_id(str(k))): _value(v) for k, v in entry.items()}
        chosen.append(table.get(tok, float("nan")))
        tops.append(table)
    return Generation(list(reference_tokens), chosen, tops)


def chunk_sizes(total_tokens: int, budget: int) -> list[int]:
    """How vLLM's scheduler splits one request's prefill under a token budget (the request alone in the batch)."""
    full, rest = divmod(total_tokens, budget)
    return [budget] * full + ([rest] if rest else [])


def decode_path_positions(prompt_len: int, scored: int, budget: int | None,
                          threshold: int = DECODE_QUERY_THRESHOLD) -> int:
    """Scored positions (the queries at prompt_len-1 .. prompt_len+scored-2) whose chunk is <= threshold tokens.
    budget None: unknown chunking, count none."""
    if budget is None:
        return 0
    total = prompt_len + scored
    count = 0
    for q in range(prompt_len - 1, prompt_len - 1 + scored):
        start = (q // budget) * budget
        if min(budget, total - start) <= threshold:
            count += 1
    return count


def compare_forced(request: str, prompt_len: int, cand: Generation, ref: Generation, group: str = "",
                   budget: int | None = None) -> TeacherForcedComparison:
    """Candidate's teacher-forced scores against the reference's own logprobs of its tokens."""
    n = len(ref.token_ids)
    deltas = [abs(a - b) for a, b in zip(cand.logprobs, ref.logprobs, strict=False)]
    finite = len(cand.logprobs) == n and all(math.isfinite(x) for x in cand.logprobs)
    argmax = [max(t, key=t.get) if t else None for t in cand.top]
    first = next((i for i in range(n) if i >= len(argmax) or argmax[i] != ref.token_ids[i]), None)
    clean = [d for d in deltas if math.isfinite(d)]
    drift = (max(deltas) if all(math.isfinite(d) for d in deltas) else math.inf) if deltas else None
    return TeacherForcedComparison(
        request=request, prompt_tokens=prompt_len, exact=first is None, first_divergence=first,
        candidate_tokens=len(cand.logprobs), reference_tokens=n, finite=finite, max_drift=drift, group=group,
        reference_gap_at_divergence=top_gap(ref, first), deltas=[round(d, 6) for d in deltas],
        mean_drift=sum(clean) / len(clean) if clean else None,
        decode_path_positions=decode_path_positions(prompt_len, n, budget))


def per_request(comparisons: Sequence[RequestComparison], field: str = "max_drift") -> dict[str, float | None]:
    """{request id: value} for the paired floor test (max_drift, or mean_drift of teacher-forced lines)."""
    return {c.request: getattr(c, field, None) for c in comparisons}


def per_position(comparisons: Sequence[TeacherForcedComparison]) -> dict[str, float]:
    """{"request/position": |delta|} over every scored position of every request."""
    return {f"{c.request}/{i}": d for c in comparisons for i, d in enumerate(c.deltas)}
