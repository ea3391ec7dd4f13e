"""Float64 reference for DCP's building blocks, written from the math (numpy only, no vLLM).

Conventions (those of the tensors the installed vLLM passes between its kernels):
- partial outputs ``outs`` are [N, B, H, D] (N = DCP ranks, B = tokens, H = heads, D = head dim),
  their log-sum-exps ``lses`` [N, B, H];
- an empty shard (a rank that holds no KV of that token's sequence, or a CUDA-graph padding row) is marked by a
  non-finite LSE: -inf by the math, +inf or NaN as some attention kernels write it (FlashAttention returns +inf for
  an empty row). Its output is undefined (may be NaN) and must not contribute;
- a token whose every shard is empty merges to output 0 and LSE -inf.
"""

from __future__ import annotations

import numpy as np


def normalise_lse(lses: np.ndarray) -> np.ndarray:
    """float64 copy with every non-finite LSE (+inf, NaN: empty-shard markers) set to -inf."""
    lses = np.asarray(lses, dtype=np.float64)
    return np.where(np.isfinite(lses), lses, -np.inf)


def merge_partials(
    outs: np.ndarray, lses: np.ndarray, base_e: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """LSE-weighted merge: LSE = logsumexp_r lse_r, out = sum_r exp(lse_r - LSE) * out_r (base 2: exp2/log2)."""
    outs = np.asarray(outs, dtype=np.float64)
    lses = normalise_lse(lses)
    log_base = 1.0 if base_e else np.log(2.0)  # lse in base 2 -> natural log units
    nat = lses * log_base
    peak = np.max(nat, axis=0)
    peak_safe = np.where(np.isfinite(peak), peak, 0.0)
    weights_unnorm = np.exp(nat - peak_safe)  # exp(-inf) = 0 for empty shards
    total = weights_unnorm.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        global_nat = np.where(total > 0, np.log(total) + peak_safe, -np.inf)
        weights = np.where(total > 0, weights_unnorm / np.where(total > 0, total, 1.0), 0.0)
    contrib = np.where(weights[..., None] > 0, outs, 0.0) * weights[..., None]  # NaN of an empty shard never enters
    return contrib.sum(axis=0), global_nat / log_base


def abs_weighted_scale(outs: np.ndarray, lses: np.ndarray, base_e: bool = True) -> float:
    """max over elements of sum_r w_r |out_r|: the magnitude the merge's rounding errors scale with."""
    outs = np.asarray(outs, dtype=np.float64)
    finite = np.where(np.isfinite(outs), outs, 0.0)
    merged_abs, _ = merge_partials(np.abs(finite), lses, base_e)
    return float(np.max(merged_abs)) if merged_abs.size else 0.0


def owner_rank(positions: np.ndarray, world: int, interleave: int) -> np.ndarray:
    """DCP rank that stores the KV of each token position: interleaved shards of `interleave` tokens, round robin."""
    return (np.asarray(positions, dtype=np.int64) // interleave) % world


def local_seq_lens(seq_lens: np.ndarray, world: int, interleave: int) -> np.ndarray:
    """[R, N]: how many of each sequence's tokens rank n stores, counted token by token (no closed formula)."""
    seq_lens = np.asarray(seq_lens, dtype=np.int64).reshape(-1)
    out = np.zeros((seq_lens.size, world), dtype=np.int64)
    for i, length in enumerate(seq_lens):
        out[i] = np.bincount(owner_rank(np.arange(length), world, interleave), minlength=world)
    return out


def local_slot_mapping(
    positions: np.ndarray,
    req_of_token: np.ndarray,
    block_table: np.ndarray,
    block_size: int,
    world: int,
    rank: int,
    interleave: int,
    pad_id: int = -1,
) -> np.ndarray:
    """Slot of each token's KV in `rank`'s cache, `pad_id` where another rank stores it.

    A rank keeps its own tokens densely, in order: its k-th local token of a sequence lives at local position k,
    i.e. slot block_table[req, k // block_size] * block_size + k % block_size.
    """
    positions = np.asarray(positions, dtype=np.int64)
    slots = np.full(positions.shape, pad_id, dtype=np.int64)
    for i, (pos, req) in enumerate(zip(positions, req_of_token, strict=True)):
        if owner_rank(np.array([pos]), world, interleave)[0] != rank:
            continue
        k = int(np.count_nonzero(owner_rank(np.arange(pos), world, interleave) == rank))
        slots[i] = int(block_table[req, k // block_size]) * block_size + k % block_size
    return slots


def head_slice(num_heads: int, world: int, rank: int) -> slice:
    """Heads a rank gets back from the reduce-scatter over heads: the rank-th contiguous block of num_heads/world."""
    if num_heads % world:
        raise ValueError(f"{num_heads} heads do not split over {world} ranks")
    per_rank = num_heads // world
    return slice(rank * per_rank, (rank + 1) * per_rank)


def gather_heads(per_rank: list[np.ndarray]) -> np.ndarray:
    """All-gather along the head dim ([B, h, E] per rank -> [B, N*h, E]) in rank order."""
    return np.concatenate([np.asarray(x, dtype=np.float64) for x in per_rank], axis=1)
