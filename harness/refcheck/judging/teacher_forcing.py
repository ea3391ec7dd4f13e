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

from harness.measure.generation import Generation
from harness.records.schema import TeacherForcedComparison
from harness.refcheck.judging.compare import stored_deltas, top_gap

DECODE_QUERY_THRESHOLD = 512  # FLASH_ATTN_MLA reorder_batch_threshold in vLLM 0.25.0


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
        reference_gap_at_divergence=top_gap(ref, first), deltas=stored_deltas(deltas),
        mean_drift=sum(clean) / len(clean) if clean else None,
        decode_path_positions=decode_path_positions(prompt_len, n, budget),
        candidate_logprobs=stored_deltas(cand.logprobs))
