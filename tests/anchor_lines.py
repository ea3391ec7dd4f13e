"""Seeded teacher-forcing runs of a noisy float32 build for the float32 anchor and the floor test (a model of the CPU
pair's cpu-noisy: docs/evidence/cpu-power-2026-12-07.md). Every position has a float32 logprob; the reference rounds
off it by ~1.4e-6, the candidate by its per-run noise (jitter, mean |e| ~3.4e-4), scaled per run by a run-level factor
of a realistic shape, plus a planted logit-scale fault's systematic move (scale x a per-position sensitivity, mean
0.342 per unit scale: the CPU pair's 0.1 % fault moved 3.42e-4) or a legitimate build's rounding move."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.judge.fp32_anchor import fp32_distance
from harness.records.schema import TeacherForcedComparison

REQUESTS, POSITIONS = 38, 24  # the CPU pair's 912 teacher-forced positions
REFERENCE_SD = 1.7e-6  # cpu-ref's mean |logprob - float32| 1.38e-6
NOISE_SD = 4.3e-4  # cpu-noisy's jitter: mean |e| 3.4e-4
SENSITIVITY = 0.342  # mean |d logprob / d scale| over the positions
RUN_SHAPES = ("t3", "lognormal", "two-valued", "ar1")


@dataclass(frozen=True)
class Case:
    """One seed: the prompts' float32 logprobs, the reference's and each run's candidate comparisons."""

    reference: dict[str, list[float]]
    fp32: dict[str, list[float]]
    runs: list[list[TeacherForcedComparison]]  # K calibration repeats, then the judged run


def run_levels(shape: str, rng: np.random.Generator, runs: int) -> np.ndarray:
    """Unit-spread run-level levels of `shape` for `runs` consecutive runs: Student t3, lognormal sigma 1 (exp of a
    Gaussian, centred at its median), two-valued 0/1 at 80/20, or a Gaussian AR(1) at lag-1 correlation 0.5."""
    g = rng.standard_normal(runs)
    if shape == "t3":
        return rng.standard_t(3, runs)
    if shape == "lognormal":
        return np.exp(g) - 1.0
    if shape == "two-valued":
        return (rng.random(runs) > 0.8).astype(float)
    x = np.empty(runs)
    x[0] = g[0]
    for i in range(1, runs):
        x[i] = 0.5 * x[i - 1] + np.sqrt(1 - 0.25) * g[i]
    return x


def comparisons(rng: np.random.Generator, fp32: np.ndarray, reference: np.ndarray, candidate: np.ndarray
                ) -> list[TeacherForcedComparison]:
    out = []
    for i in range(fp32.shape[0]):
        deltas = np.abs(candidate[i] - reference[i])
        out.append(TeacherForcedComparison.model_construct(
            request=f"r{i}", prompt_tokens=64, exact=True, first_divergence=None, max_drift=float(deltas.max()),
            reference_tokens=fp32.shape[1], candidate_tokens=fp32.shape[1], finite=True,
            deltas=[float(d) for d in deltas], mean_drift=float(deltas.mean()),
            candidate_logprobs=[float(x) for x in candidate[i]]))
    return out


def case(seed: int, shape: str, run_scale: float = 0.01, scale: float = 0.0, legit: float = 0.0, k: int = 5,
         fault_in_calibration: bool = False) -> Case:
    """K clean calibration repeats and one judged run. `run_scale`: the run-level factor's spread (the candidate's noise
    x (1 + run_scale x level)); `scale`: the logit-scale fault planted in the judged run; `legit`: a legitimate build's
    rounding move in the judged run (each logprob moved by +-legit at 70 % of the positions, as split_k_logits)."""
    rng = np.random.default_rng(seed)
    shape_rng = np.random.default_rng(seed + 10_000)
    fp32 = -np.abs(rng.normal(0.5, 0.4, (REQUESTS, POSITIONS)))
    sensitivity = rng.lognormal(0.0, 1.0, (REQUESTS, POSITIONS)) * SENSITIVITY / np.exp(0.5)
    reference = fp32 + rng.normal(0.0, REFERENCE_SD, fp32.shape)
    factors = np.maximum(0.1, 1.0 + run_scale * run_levels(shape, shape_rng, k + 1))
    runs = []
    for r in range(k + 1):
        candidate = fp32 + rng.normal(0.0, NOISE_SD * factors[r], fp32.shape)
        judged = r == k
        if scale and (judged or fault_in_calibration):
            candidate = candidate + scale * sensitivity
        if legit and judged:
            moved = rng.random(fp32.shape) < 0.7
            candidate = candidate + moved * rng.choice((-legit, legit), fp32.shape)
        runs.append(comparisons(rng, fp32, reference, candidate))
    ids = [f"r{i}" for i in range(REQUESTS)]
    return Case({i: list(map(float, reference[n])) for n, i in enumerate(ids)},
                {i: list(map(float, fp32[n])) for n, i in enumerate(ids)}, runs)


def distances(c: Case) -> list:
    return [fp32_distance(k, run, c.reference, c.fp32) for k, run in enumerate(c.runs, 1)]
