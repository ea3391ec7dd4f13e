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


# Run-level noise of a given shape (issue 55): every request of one run moves together by the run's level, and the
# checks of one run share part of it (a jitter realization, a graph capture, a batch composition move them all).
SHAPES = ("gaussian", "t3", "lognormal", "two-valued")


def levels(shape: str, rng, runs: int, checks: int, rho: float = 0.5, lag: bool = False):
    """runs x checks run-level shifts of `shape` (unit spread: lognormal sigma 1, t with 3 df, two-valued 0/1 at
    80/20), correlated across the checks of one run through a Gaussian copula: equicorrelated rho, or lag-1 (AR(1)
    in the check index, rho between neighbours)."""
    import numpy as np
    from scipy import stats

    g = rng.standard_normal((runs, checks))
    if lag:
        for c in range(1, checks):
            g[:, c] = rho * g[:, c - 1] + np.sqrt(1 - rho ** 2) * g[:, c]
    else:
        g = np.sqrt(rho) * rng.standard_normal((runs, 1)) + np.sqrt(1 - rho) * g
    u = stats.norm.cdf(g)
    if shape == "gaussian":
        return g
    if shape == "t3":
        return stats.t.ppf(u, 3)
    if shape == "lognormal":
        return np.exp(g)
    return (u > 0.8).astype(float)


def structure(seed: int, n: int = 12, positions: int = 6, p50: float = 1e-3) -> list[list[float]]:
    """The prompts' own clean |delta| (the same every run: the same prompts are sent), median `p50` (the GPU pairs'
    1e-3), a heavier tail (x4 at 2 % of positions)."""
    rng = random.Random(seed)
    sigma = p50 / 0.6745
    return [[abs(rng.gauss(0, sigma)) * (4 if rng.random() < 0.02 else 1) for _ in range(positions)]
            for _ in range(n)]


def leveled(rows: list[list[float]], level: float, noise: float = 0.0, seed: int = 0,
            moved: tuple[float, float] = (0.0, 0.0)) -> list[TeacherForcedComparison]:
    """One run of a check: each |delta| moved by the run's `level` and by `noise` per position (Gaussian), and
    `moved` = (size, share): a build rounding otherwise moves that share of the positions' logprobs by +-size."""
    rng = random.Random(seed)
    out = []
    for i, row in enumerate(rows):
        deltas = []
        for d in row:
            d = max(0.0, d + level + (rng.gauss(0, noise) if noise else 0.0))
            if moved[1] and rng.random() < moved[1]:
                d = abs(d + rng.choice((-1, 1)) * moved[0])
            deltas.append(d)
        out.append(TeacherForcedComparison(request=f"r{i}", prompt_tokens=64, exact=True, first_divergence=None,
                                           max_drift=max(deltas), reference_tokens=len(row),
                                           candidate_tokens=len(row), finite=True, deltas=deltas,
                                           mean_drift=sum(deltas) / len(row)))
    return out


def calibrated_run(seed: int, shape: str, checks: int = 11, scale: float = 3e-4, noise: float = 1e-4,
                   rho: float = 0.5, lag: bool = False, shift: float = 0.0, budget=None) -> list:
    """One run of `checks` calibrated checks, each judged as check.py judges it (held_out_shifts, mean_floor,
    judge_floor_pairing) against its own K = 5 clean calibration repeats, at the run's budget (None: a family of
    `checks` and the rounding unit of each calibration's spread). Run-level noise: `scale` x a `shape` level per run
    and check (correlated across the run's checks), `noise` per position; `shift` planted at every position of the
    judged run. Returns each check's FloorJudgement."""
    import numpy as np

    from harness.judge.calibration import held_out_budget, held_out_shifts, mean_floor, spread
    from harness.judge.drift_floor import judge_floor_pairing
    from harness.judge.error_budget import Family

    rng = np.random.default_rng(seed)
    run_levels = levels(shape, rng, 6, checks, rho, lag) * scale
    out = []
    for c in range(checks):
        rows = structure(seed * 101 + c, n=10, positions=5)
        repeats = [leveled(rows, float(run_levels[k, c]), noise, seed * 7919 + k * 97 + c) for k in range(5)]
        judged = leveled(rows, float(run_levels[5, c]) + shift, noise, seed * 7919 + 5 * 97 + c)
        cut = budget if budget is not None else held_out_budget(spread(repeats), Family(checks, "simulated"))
        out.append(judge_floor_pairing(judged, mean_floor(repeats), "cal", held_out_shifts(repeats), cut))
    return out


def ar1_nights(rng, runs: int, rho: float, sigma: float = 0.03):
    """TPOT (level 4) over `runs` nights whose noise is lag-1 autocorrelated (AR(1), marginal sd `sigma` in logs)."""
    import numpy as np

    x = np.empty(runs)
    x[0] = rng.normal(0, sigma)
    for i in range(1, runs):
        x[i] = rho * x[i - 1] + rng.normal(0, sigma * np.sqrt(1 - rho ** 2))
    return 4.0 * np.exp(x)
