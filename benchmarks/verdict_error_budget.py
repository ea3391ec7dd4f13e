"""The verdict's error budget, measured (issue 55 items 1-4; docs/gates.md "One error budget per run").

    PYTHONPATH=. .venv/bin/python benchmarks/verdict_error_budget.py [--runs 20000] [--nights 1000]

1. Clean runs: per check and per run (m = 11 calibrated checks, K = 5 repeats each), how often the run-level floor
   test fails, by the shape of the run-level shift (Gaussian, Student t3, lognormal sigma 1, two-valued 80/20) and
   its correlation across the run's checks (independent, equicorrelated 0.5, lag-1 0.5 along the checks): the bound
   before issue 55 (Student t at 1 % per check, sd at least 1e-6) against the budget (alpha 0.01/m, the lognormal-safe
   factor), with the rounding unit u = 0 (the statistical part alone; two-valued also at u = the gap). Exact on the
   scalars: a run's shift against the mean floor is its level minus the repeats' mean (drift_floor.mean_shift is
   linear), judged by drift_floor.run_level_bound itself.
2. A legitimate build: a bit-identical K = 5 calibration (median |delta| ~1e-3, the GPU pairs') and a build moving
   20 % or 100 % of the positions' logprobs by one rounding unit, judged with the harness's own functions on
   RequestComparison data (floor test and derived drift limit); before: zero width.
3. Power: the smallest mean shift caught at 80 %, per check and per run (a fault moving all 11 checks), in units of
   the run-to-run sd, and what that is on the CPU noisy build (held-out sd ~7e-6) and on a bit-identical GPU check.
4. The nightly gate with lag-1 autocorrelated nights (27 TPOT series, 3 % noise): before (rho 0) and now (pooled
   estimate plus its margin), and a 30 % step's detection within 5 nights.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.history.nightly import judge  # noqa: E402
from harness.history.trends import Series, judged_night, judged_series  # noqa: E402
from harness.judge.calibration import derive_limits, held_out_shifts, mean_floor, spread  # noqa: E402
from harness.judge.drift_floor import judge_floor_pairing, run_level_bound  # noqa: E402
from harness.judge.error_budget import Family, RoundingUnit, RunBudget, rounding_unit, shape_factor  # noqa: E402
from tests.drift_lines import SHAPES, ar1_nights, leveled, levels, structure  # noqa: E402

K, M = 5, 11
GPU_GATES = {"long_prefix": {"enforce_timing": True, "tpot_p50_tolerance": 0.05}}


def interval(k: int, n: int) -> str:
    hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k / n:.2%} (<= {hi:.2%})"


OLD_T = stats.t.isf(0.01, K - 1)


def old_bound(shifts: np.ndarray) -> float:
    """The bound before issue 55: Student t at 1 % per check, sd at least 1e-6, no unit."""
    sd = max(shifts.std(ddof=1) * (K - 1) / K, 1e-6)
    return shifts.mean() + OLD_T * sd * math.sqrt(1 + 1 / K)


def held_out(x: np.ndarray) -> np.ndarray:
    """Each repeat's shift against the others' mean (calibration.held_out_shifts on scalars)."""
    return x - (x.sum() - x) / (len(x) - 1)


def clean_runs(shape: str, runs: int, corr: str, unit: float, scale: float = 1e-4) -> tuple[str, str, str, str]:
    rng = np.random.default_rng(55)
    rho, lag = (0.0, False) if corr == "independent" else (0.5, corr == "lag")
    budget = RunBudget(Family(M, "simulated"), RoundingUnit(unit, ""))
    old_check = new_check = old_run = new_run = 0
    for _ in range(runs):
        x = levels(shape, rng, K + 1, M, rho, lag) * scale
        old_fail = new_fail = False
        for c in range(M):
            shifts, new = held_out(x[:K, c]), x[K, c] - x[:K, c].mean()
            o, n = new > old_bound(shifts), new > run_level_bound(list(shifts), budget)[0]
            old_check += o
            new_check += n
            old_fail |= o
            new_fail |= n
        old_run += old_fail
        new_run += new_fail
    return (interval(old_check, runs * M), interval(old_run, runs), interval(new_check, runs * M),
            interval(new_run, runs))


def table_clean(runs: int) -> None:
    print(f"\n## 1. Clean runs: {M} calibrated checks a run, K = {K}, {runs} runs per row\n")
    print("| shift shape | across checks | u | before: per check | before: per run | now: per check | now: per run |")
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        for corr in ("independent", "equicorrelated", "lag"):
            print(f"| {shape} | {corr} | 0 | " + " | ".join(clean_runs(shape, runs, corr, 0.0)) + " |")
    # two-valued with the rounding unit covering the gap (the modes are two roundings): scale 1e-4 = the gap
    print("| two-valued | equicorrelated | the gap | " + " | ".join(clean_runs("two-valued", runs, "equicorrelated",
                                                                           1e-4)) + " |")


def table_rounding(seeds: int) -> None:
    print(f"\n## 2. A legitimate rounding build against a bit-identical calibration ({seeds} seeds)\n")
    print("| positions moved | before: floor or limit fails | now: floor fails | now: drift limit fails |")
    print("|---|---|---|---|")
    for share in (0.2, 1.0):
        before = floor_fails = limit_fails = 0
        for seed in range(seeds):
            rows = structure(seed)
            repeats = [leveled(rows, 0.0)] * K
            s = spread(repeats)
            build = leveled(rows, 0.0, moved=(s.drift_p50, share), seed=seed)
            unit = rounding_unit(s.drift_p50, 0.0)
            floor = mean_floor(repeats)
            shifts = held_out_shifts(repeats)
            zero = judge_floor_pairing(build, floor, "cal", shifts, RunBudget(Family(1, ""), RoundingUnit(0.0, "")))
            before += not zero.passed or any(c.max_drift > s.max_drift for c in build)
            floor_fails += not judge_floor_pairing(build, floor, "cal", shifts, RunBudget(Family(M, ""), unit)).passed
            limit = derive_limits(s, 0.0, 0.0).drift_limit
            limit_fails += any(c.max_drift > limit for c in build)
        print(f"| {share:.0%} | {interval(before, seeds)} | {interval(floor_fails, seeds)} | "
              f"{interval(limit_fails, seeds)} |")


def caught_at_80(factor: float, runs: int, whole_run: bool) -> float:
    """Gaussian run-level noise, sd 1: the smallest planted shift (in sd) failing 80 % of runs, one check or all M
    moved, each check at `factor` x its held-out sd (bisection over seeded runs)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((runs, K + 1, M if whole_run else 1))
    cal = x[:, :K, :]
    sd = cal.std(axis=1, ddof=1)
    bound = cal.mean(axis=1) + factor * sd * math.sqrt(1 + 1 / K)
    low, high = 0.0, 200.0
    for _ in range(40):
        mid = (low + high) / 2
        caught = (x[:, K, :] + mid > bound).any(axis=1).mean()
        low, high = (mid, high) if caught < 0.8 else (low, mid)
    return high


def table_power(runs: int) -> None:
    floor_alpha = RunBudget(Family(M, "simulated")).alpha  # the floor test's part of a check's share
    old, new = stats.t.isf(0.01, K - 1), shape_factor(K, floor_alpha)
    print(f"\n## 3. Power: smallest mean shift caught at 80 % (Gaussian run-level noise, K = {K})\n")
    print("| | factor x sd | one check moved | all 11 checks moved | CPU noisy build (sd 7e-6) | bit-identical GPU |")
    print("|---|---|---|---|---|---|")
    for name, factor, u in (("before: 1 % per check, Student t", old, 0.0),
                            (f"now: 1 % per run (alpha 0.01/{M}, the floor test {floor_alpha:.2g}), "
                             "lognormal-safe", new, 1e-3)):
        one, every = caught_at_80(factor, runs, False), caught_at_80(factor, runs, True)
        print(f"| {name} | {factor:.3g} | {one:.3g} sd | {every:.3g} sd | {one * 7e-6:.2g} | "
              f"{'any shift' if u == 0 else f'{u:g} (the unit)'} |")


def night(values: list[np.ndarray], independent: bool):
    of_night = [(Series("arm", f"long_prefix.c{i}.tpot_p50_ms", [f"n{j:02d}" for j in range(len(v))], list(v)), None)
                for i, v in enumerate(values)]
    if independent:
        return judge([judged_series(s, GPU_GATES, rho=0.0) for s, _ in of_night])
    return judge(judged_night(of_night, {"arm": GPU_GATES}))


def table_nightly(nights: int) -> None:
    print(f"\n## 4. Nightly gate: 27 gated TPOT series, 3 % noise, {nights} nights per cell\n")
    print("| lag-1 autocorrelation | before (independent) | now (pooled estimate + 2 se) |")
    print("|---|---|---|")
    for rho in (0.0, 0.3, 0.5):
        cells = []
        for independent in (True, False):
            rng = np.random.default_rng(int(rho * 10))
            failed = sum(not night([ar1_nights(rng, 20, rho) for _ in range(27)], independent).passed
                         for _ in range(nights))
            cells.append(interval(failed, nights))
        print(f"| {rho} | " + " | ".join(cells) + " |")
    rng = np.random.default_rng(3)
    found = [0, 0]
    trials = max(50, nights // 5)
    for _ in range(trials):
        values = [ar1_nights(rng, 19, 0.0) for _ in range(27)]
        values[0][14:] *= 1.3
        for i, independent in enumerate((True, False)):
            found[i] += any("long_prefix.c0." in f for f in night(values, independent).failures)
    print(f"\n+30 % step in one of 27 series (independent nights), found by its 5th night: before "
          f"{found[0] / trials:.0%}, now {found[1] / trials:.0%} ({trials} trials)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--nights", type=int, default=1000)
    args = ap.parse_args()
    table_clean(args.runs)
    table_rounding(args.seeds)
    table_power(args.runs)
    table_nightly(args.nights)
    return 0


if __name__ == "__main__":
    sys.exit(main())
