"""Phases and weights of a RoPE previous-token head (pure, numpy only).

With a constant query and key (the same at every position), a RoPE head's score at relative offset d = m - n is
sum_j A_j cos((d - offset) * theta_j): a sum of cosines at the model's fixed frequencies, peaked at `offset`. The
weights A_j decide how far below that peak every other offset stays, up to the longest context: high frequencies
separate the neighbours (d = 0, 2), low ones push far positions down, and together they must not realign anywhere
before max_len. `kernel_weights` maximises the worst-case gap (a max-min over offsets, solved by multiplicative
weights) and `kernel_gap` checks it on every offset, so the head is verified to the length it is built for.
"""

from __future__ import annotations

import numpy as np


def rope_frequencies(theta: float, rope_dim: int) -> np.ndarray:
    """theta_j = base^(-2j/dim), j < dim/2: the default (unscaled) RoPE frequencies of Llama and DeepseekV3."""
    return theta ** (-np.arange(0, rope_dim, 2, dtype=np.float64) / rope_dim)


def _deficits(freqs: np.ndarray, max_len: int) -> np.ndarray:
    """1 - cos(d * theta_j) for d = 1..max_len: the score each pair loses at distance d from the peak."""
    d = np.arange(1, max_len + 1, dtype=np.float64)
    return 1.0 - np.cos(np.outer(d, freqs))


def kernel_gap(weights: np.ndarray, freqs: np.ndarray, max_len: int) -> tuple[float, int]:
    """(the smallest normalised peak-minus-score over offsets 1..max_len away from the peak, where it is); the peak
    is sum(weights), so the gap is a fraction of it."""
    s = _deficits(freqs, max_len) @ (weights / weights.sum())
    return float(s.min()), int(np.argmin(s)) + 1


def kernel_weights(freqs: np.ndarray, max_len: int, iters: int = 800) -> np.ndarray:
    """Non-negative weights (summing to 1, rounded to 1e-4 so that float noise cannot change the saved model)
    maximising the worst-case gap over offsets 1..max_len."""
    a = _deficits(freqs, max_len)
    w = np.full(len(freqs), 1.0 / len(freqs))
    best, best_gap = w, -1.0
    for i in range(iters):
        s = a @ w
        m = s.min()
        if m > best_gap:
            best, best_gap = w, m
        beta = 50.0 if i < iters // 2 else 200.0  # soft minimum, sharpened halfway
        p = np.exp(-beta * (s - m))
        g = a.T @ (p / p.sum())
        w = w * np.exp(0.5 * g / g.max())
        w = w / w.sum()
    w = np.round(best, 4)
    return w / w.sum()
