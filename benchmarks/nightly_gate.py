"""The nightly gate's error rates (harness/history/nightly.py; issue 47), measured: how often a clean night fails, how
soon a step is found, and what the project's real clean nights say.

    python benchmarks/nightly_gate.py [--store docs/evidence/cpu-history-2026-12-04/history.sqlite] [--nights 2000]

1. The real store: each candidate's series count (all, and gated under the gates its runs recorded) and each
   metric's measured per-run noise (log scale for speed and capacity, linear for correctness).
2. Clean nights: one night judged over `m` series of 20 runs, m = the real store's series count (every series
   gated, as on a GPU arm with timing enforced, and the CPU pair's gated count), Gaussian and heavy-tailed (Student t,
   3 df) noise at 3 % and 10 % per run; the share of nights that fail, with its exact 95 % interval.
3. Power: a step of 10 % or 30 % in one series of m (the others clean) at 3 % noise and at the H200's TPOT noise
   (0.089 median-based, 0.132 RMS, docs/history.md), 14 clean runs before it: the share of series found within 1, 2
   and 5 nights of the step's first night, and the speed-up-beside-a-correctness-change rule's.
4. The real nights replayed: each night of the store judged as `history check` judges it; then a planted correctness
   step (graph_replay's max drift + 0.01 nats, its exact rate - 1/32) in a copy of those records from night 9 on.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.history import store  # noqa: E402
from harness.history.nightly import BUDGET, NightlyVerdict, judge  # noqa: E402
from harness.history.trends import Series, family, gate_of, judged_series, nightly, run_gates, series  # noqa: E402

STORE = Path(__file__).resolve().parents[1] / "docs/evidence/cpu-history-2026-12-04/history.sqlite"
GPU_GATES = {"long_prefix": {"enforce_timing": True, "tpot_p50_tolerance": 0.05}}  # gates.yaml's defaults
H200_NOISE = (0.089, 0.132)


def interval(k: int, n: int) -> str:
    lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k}/{n} = {k / n:.2%} (95 % CI {lo:.2%}-{hi:.2%})"


def speed_series(i: int, values: np.ndarray) -> Series:
    return Series("arm", f"long_prefix.c{i}.tpot_p50_ms", [f"n{j:02d}" for j in range(len(values))], list(values))


def night(all_values: list[np.ndarray], gates: dict = GPU_GATES) -> NightlyVerdict:
    return judge([judged_series(speed_series(i, v), gates) for i, v in enumerate(all_values)])


def noise_draw(rng: np.random.Generator, n: int, sigma: float, tails: str) -> np.ndarray:
    if tails == "t3":  # unit variance: t(3) has variance 3
        return rng.standard_t(3, n) * sigma / np.sqrt(3)
    return rng.normal(0, sigma, n)


def clean_rate(m: int, nights: int, sigma: float, tails: str, runs: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    failed = sum(not night([4.0 * np.exp(noise_draw(rng, runs, sigma, tails)) for _ in range(m)]).passed
                 for _ in range(nights))
    return interval(failed, nights)


def found_within(m: int, trials: int, sigma: float, step: float, seed: int, horizon: int = 5) -> list[float]:
    """Share of series whose step is found by night 1, 2, .., horizon (night 1: the step's first run)."""
    rng = np.random.default_rng(seed)
    first = []
    for _ in range(trials):
        base = [4.0 * np.exp(rng.normal(0, sigma, 14 + horizon)) for _ in range(m)]
        base[0][14:] *= 1 + step
        # found: a failure naming the stepped series (c0), not a false alarm elsewhere
        found = next((h for h in range(1, horizon + 1)
                      if any("long_prefix.c0." in f for f in night([v[:14 + h] for v in base]).failures)), None)
        first.append(found)
    return [sum(1 for f in first if f is not None and f <= h) / trials for h in range(1, horizon + 1)]


def correctness_night(rng: np.random.Generator, kinds: dict[str, int], runs: int = 20) -> NightlyVerdict:
    """One clean night of correctness series (and gated TPOT), each kind drawn from the noise it has: max drift
    lognormal (sigma 0.5 in logs: GPU batch composition moved graph_replay's by up to 0.85 of ~1.0), tie-flip and
    exact rates binomial over 32 requests (p 0.15 and 0.85: the H200 calibration's graph_replay), TPOT at 3 %."""
    series_list = []
    for kind, count in kinds.items():
        for i in range(count):
            if kind == "drift":
                v, m = np.exp(rng.normal(np.log(0.5), 0.5, runs)), f"check.c{i}.max_drift"
            elif kind == "tie":
                v, m = rng.binomial(32, 0.15, runs) / 32, f"check.c{i}.tie_flip_rate"
            elif kind == "exact":
                v, m = rng.binomial(32, 0.85, runs) / 32, f"check.c{i}.exact_rate"
            else:
                v, m = 4.0 * np.exp(rng.normal(0, 0.03, runs)), f"long_prefix.c{i}.tpot_p50_ms"
            series_list.append(Series("arm", m, [f"n{j:02d}" for j in range(runs)], list(v)))
    return judge([judged_series(s, GPU_GATES) for s in series_list])


def correctness_rate(kinds: dict[str, int], nights: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    return interval(sum(not correctness_night(rng, kinds).passed for _ in range(nights)), nights)


def speedup_rule(trials: int, seed: int) -> list[float]:
    """A 20 % speed-up at 3 % noise on the night graph_replay's max drift rose 0.05 nats (noise 0.01)."""
    rng = np.random.default_rng(seed)
    hits = []
    for _ in range(trials):
        speed = 4.0 * np.exp(rng.normal(0, 0.03, 19))
        drift = np.abs(0.02 + rng.normal(0, 0.01, 19))
        speed[14:] *= 0.8
        drift[14:] += 0.05
        found = None
        for h in range(1, 6):
            s = Series("arm", "long_prefix.c1.tpot_p50_ms", [str(j) for j in range(14 + h)], list(speed[:14 + h]))
            d = Series("arm", "check.graph_replay.max_drift", s.runs, list(drift[:14 + h]))
            v = judge([judged_series(s, GPU_GATES), judged_series(d, GPU_GATES)])
            if any(f.startswith("speed-up") for f in v.failures):
                found = h
                break
        hits.append(found)
    return [sum(1 for f in hits if f is not None and f <= h) / trials for h in (1, 2, 5)]


def real_store(path: Path) -> int:
    with store.connect(path) as db:
        runs = [r for r in store.runs(db) if r.status == "finished"]
        cands = sorted({c for r in runs for c in r.candidates.split(",") if c})
        gated_total = 0
        for arm in cands:
            metrics = store.metric_names(db, arm)
            gates = run_gates(runs[-1].manifest, arm)
            gated = [m for m in metrics if gate_of(m, gates)[0]]
            gated_total += len(gated)
            print(f"{arm}: {len(metrics)} series, {len(gated)} gated under its runs' gates "
                  f"({', '.join(sorted({family(m) for m in gated}))})")
            for m in metrics:
                values = np.asarray(series(db, arm, m).values, dtype=float)
                log = family(m) != "correctness" and np.all(values > 0)
                x = np.log(values) if log else values
                print(f"  {m:42} {len(x):3} runs  noise {np.std(x, ddof=1):.4g}{' (log)' if log else ''}")
        return max(len(store.metric_names(db, a)) for a in cands)


def replay(path: Path) -> list[str]:
    out = []
    with store.connect(path) as db:
        for r in store.runs(db):
            v = nightly(db, r.run_id)
            head = "FAIL" if v.failures else ("PASS" if v.passed else "NOT JUDGED")
            out.append(f"{r.run_id}: {head}" + (f" ({v.failures[0][:110]}...)" if v.failures else ""))
    return out


def copied(path: Path) -> Path:
    copy = Path(tempfile.mkdtemp()) / path.name
    shutil.copy(path, copy)
    return copy


def planted(path: Path, from_night: int) -> Path:
    copy = copied(path)
    db = sqlite3.connect(copy)
    keys = [k for k, i in db.execute("SELECT run_key, run_id FROM runs") if int(i.split("-")[1]) >= from_night]
    for k in keys:
        db.execute("UPDATE metrics SET value = value + 0.01 WHERE run_key = ? AND metric = "
                   "'check.graph_replay.max_drift'", (k,))
        db.execute("UPDATE metrics SET value = value - 1.0 / 32 WHERE run_key = ? AND metric = "
                   "'check.graph_replay.exact_rate'", (k,))
    db.commit()
    db.close()
    return copy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, default=STORE)
    ap.add_argument("--nights", type=int, default=2000)
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not args.store.is_file():
        ap.error(f"--store {args.store}: no history store there (a SQLite file `harness history` writes)")
    print(f"== 1. the real store {args.store}")
    args.store = copied(args.store)  # opening a store migrates it: the evidence stays as it was
    m = real_store(args.store)
    print(f"\n== 2. clean nights (budget {BUDGET:.0%}): share failing, 20 runs per series")
    for size in (m, 6):
        for sigma in (0.03, 0.10):
            for tails in ("gaussian", "t3"):
                rate = clean_rate(size, args.nights, sigma, tails, 20, args.seed)
                print(f"  {size:2} series, {tails:8} noise {sigma:.0%}: {rate}")
    print(f"  {m:2} series, gaussian noise 3 %, 8 runs (short history): "
          f"{clean_rate(m, args.nights, 0.03, 'gaussian', 8, args.seed)}")
    print("  correctness series (always gated), their own noise (correctness_night):")
    for kinds in ({"drift": 6}, {"tie": 6}, {"exact": 6}, {"drift": 27},
                  {"drift": 6, "tie": 6, "exact": 6, "tpot": 2}):
        label = " + ".join(f"{n} {k}" for k, n in kinds.items())
        print(f"    {label:32} {correctness_rate(kinds, args.nights, args.seed)}")
    print(f"\n== 3. power: one stepped series among {m}, 14 clean runs before the step ({args.trials} series each)")
    print("  noise   step   found within 1 / 2 / 5 nights")
    for sigma in (0.03, *H200_NOISE):
        for step in (0.10, 0.30):
            share = found_within(m, args.trials, sigma, step, args.seed)
            print(f"  {sigma:.3f}  {step:+.0%}   {share[0]:.2f} / {share[1]:.2f} / {share[4]:.2f}")
    rule = speedup_rule(args.trials, args.seed)
    print(f"  speed-up -20 % (noise 3 %) beside max drift +0.05 (noise 0.01): found within 1 / 2 / 5 nights "
          f"{rule[0]:.2f} / {rule[1]:.2f} / {rule[2]:.2f}")
    print("\n== 4. the real nights replayed")
    print("\n".join(f"  {line}" for line in replay(args.store)))
    print("  planted from night 9: graph_replay max drift + 0.01 nats, exact rate - 1/32")
    print("\n".join(f"  {line}" for line in replay(planted(args.store, 9))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
