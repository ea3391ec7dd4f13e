"""Synthetic per-request comparisons with a bf16-like drift (shared by the calibration tests)."""

import random

from harness.records.schema import TeacherForcedComparison


def repeat(seed: int, shift: float = 0.0, n: int = 40, positions: int = 24, flips: dict | None = None
           ) -> list[TeacherForcedComparison]:
    """Teacher-forced lines like a clean bf16 pair: |delta| ~ 0.03 with a heavier tail, every position moved by
    `shift`; `flips` {request index: reference gap} makes those requests diverge there."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        deltas = [abs(rng.gauss(0, 0.03)) * (4 if rng.random() < 0.02 else 1) + shift for _ in range(positions)]
        gap = (flips or {}).get(i)
        out.append(TeacherForcedComparison(request=f"r{i}", prompt_tokens=64, exact=gap is None,
                                           first_divergence=None if gap is None else 5, max_drift=max(deltas),
                                           reference_tokens=positions, candidate_tokens=positions, finite=True,
                                           reference_gap_at_divergence=gap, deltas=deltas,
                                           mean_drift=sum(deltas) / positions))
    return out
