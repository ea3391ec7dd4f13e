"""The float32 anchor's error rates on seeded simulations (harness/calibrate/anchor.py judge_fp32): how often a clean
first calibration is refused, and the smallest planted shift it refuses at 80 %.

    .venv/bin/python benchmarks/anchor_power.py

Noise as measured and worse: each position's error against float32 is a request factor (lognormal sigma 0.5, shared by
both arms: the same prompt rounds alike) times Student t3 (heavy tails), of scale 0.01 (bf16: the measured bf16
distance of the tiny Llama is 0.011 nats, benchmarks/anchor_controls.py) or 1e-6 (float32: vLLM's measured 1.4e-6);
38-40 requests x 32 positions, K = 2 repeats, as the CPU pair's teacher_forcing. A fault adds `shift` nats at a
`shifted` fraction of the candidate's positions; `coarser` scales the candidate's own rounding (a legitimate kernel
that rounds more).
"""

from __future__ import annotations

import numpy as np

from harness.calibrate.anchor import fp32_distance, judge_fp32
from harness.records.schema import TeacherForcedComparison

REQUESTS, POSITIONS = 40, 32


def request_factors(rng: np.random.Generator) -> np.ndarray:
    """How much each prompt's positions round (lognormal sigma 0.5): a property of the prompt, shared by both arms."""
    return rng.lognormal(0, 0.5, REQUESTS)


def arm_errors(rng: np.random.Generator, scale: float, factors: np.ndarray) -> dict[str, list[float]]:
    """One execution's per-position error against float32: the request's factor times Student t3 (heavy tails)."""
    draws = scale * factors[:, None] * rng.standard_t(3, (REQUESTS, POSITIONS))
    return {f"r{r}": draws[r].tolist() for r in range(REQUESTS)}


def simulated(seed: int, scale: float, shift: float = 0.0, shifted: float = 0.0, coarser: float = 1.0):
    """(fp32, reference logprobs, candidate comparisons) of one repeat."""
    rng = np.random.default_rng(seed)
    fp32 = {f"r{r}": (-np.abs(rng.normal(0.5, 0.5, POSITIONS))).tolist() for r in range(REQUESTS)}
    factors = request_factors(rng)
    ref_err, cand_err = arm_errors(rng, scale, factors), arm_errors(rng, scale, factors)
    reference = {i: [x + e for x, e in zip(fp32[i], ref_err[i], strict=True)] for i in fp32}
    comparisons = []
    for i in fp32:
        moved = rng.random(POSITIONS) < shifted
        cand = [x + coarser * e + (shift if m else 0.0) for x, e, m in zip(fp32[i], cand_err[i], moved, strict=True)]
        deltas = [abs(a - b) for a, b in zip(cand, reference[i], strict=True)]
        comparisons.append(TeacherForcedComparison(
            request=i, prompt_tokens=100, exact=True, first_divergence=None, candidate_tokens=POSITIONS,
            reference_tokens=POSITIONS, finite=True, max_drift=max(deltas), deltas=deltas, candidate_logprobs=cand))
    return fp32, reference, comparisons


def verdict(seed: int, scale: float, shift: float = 0.0, shifted: float = 0.0, coarser: float = 1.0, repeats: int = 2):
    distances = []
    for k in range(1, repeats + 1):
        fp32, reference, comparisons = simulated(seed * 10 + k, scale, shift, shifted, coarser)
        distances.append(fp32_distance(k, comparisons, reference, fp32))
    return judge_fp32(distances)


def refused(seeds: range, scale: float, shift: float = 0.0, shifted: float = 0.0, coarser: float = 1.0) -> float:
    return sum(not verdict(s, scale, shift, shifted, coarser).passed for s in seeds) / len(seeds)


def main() -> None:
    clean = range(100_000, 101_000)
    print(f"clean bf16: {refused(clean, 0.01):.3f} of {len(clean)} refused")
    print(f"clean float32: {refused(range(300), 1e-6):.3f} of 300")
    for coarser, seeds in ((1.06, range(1000)), (1.12, range(500))):
        print(f"bf16 candidate rounding {coarser:g}x the reference's: {refused(seeds, 0.01, coarser=coarser):.3f} of "
              f"{len(seeds)}")
    for shift, shifted in ((0.01, 0.2), (0.02, 0.2), (0.03, 0.2), (0.05, 0.2), (0.005, 1.0), (0.01, 1.0)):
        print(f"bf16 shift {shift:g} at {shifted:.0%} of positions: {refused(range(200), 0.01, shift, shifted):.3f}")
    for shift in (2e-5, 5e-5):
        print(f"float32 shift {shift:g} everywhere: {refused(range(200), 1e-6, shift, 1.0):.3f}")


if __name__ == "__main__":
    main()
