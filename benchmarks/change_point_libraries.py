"""Which change-point library the history uses, by measurement: planted steps and clean series through each.

    .venv/bin/python benchmarks/change_point_libraries.py [--series 300] \
        [--otava-python /tmp/otava-venv/bin/python] [--spa-python /tmp/spa-venv/bin/python]

Candidates (each in its own environment where it pins numpy: apache-otava==0.8.0 pins numpy 2.2.0, MongoDB's
signal-processing-algorithms 2.1.6 numpy<2):
- harness: ruptures 1.1.10 binary segmentation + Welch t-test merge (harness/history/changepoints.py);
- otava: apache-otava's compute_change_points (E-divisive split + t-test merge), max_pvalue 0.001;
- spa: signal-processing-algorithms' e_divisive (permutation test), pvalue 0.001.

Noise: the run-to-run scatter of TPOT p50 between identical H200 runs, from the stored evidence (16 pairs: the two
clean gpu-mla qualify runs of docs/evidence/h200-2026-12-04b, 4 arm-levels; the capacity suite's `--repeat 2` table of
docs/evidence/h200-2026-12-04.md, 12 client-levels). Per-run sigma of log TPOT = RMS(log ratio) / sqrt 2 (and its
median-based robust value). Series are log-normal at that sigma (and at 0.03, a quieter build), a 10 % step planted.
Prints per library and scenario: share of series with any change point (false alarms on clean ones), found at the
planted run exactly, within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.history.changepoints import change_points  # noqa: E402

EVIDENCE = Path(__file__).resolve().parents[1] / "docs" / "evidence"
# docs/evidence/h200-2026-12-04.md, "X#2 / X, TPOT mean": harness, bare and bench clients at c1, c2, c4, c8
CAPACITY_REPEAT_RATIOS = [1.330, 1.052, 1.030, 0.973, 1.112, 0.722, 1.001, 0.918, 1.037, 1.088, 0.980, 0.917]

ADAPTER = r"""
import json, sys
import numpy as np
which, p = sys.argv[1], float(sys.argv[2])
out = []
for s in json.load(sys.stdin):
    if which == "otava":
        from otava.analysis import compute_change_points
        out.append([int(c.index) for c in compute_change_points(list(np.log(s)), window_len=50, max_pvalue=p)[0]])
    else:
        from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
        out.append(sorted(int(i) for i in e_divisive(np.log(np.array(s)), pvalue=p, permutations=100)))
print(json.dumps(out))
"""


def identical_run_ratios() -> list[float]:
    """TPOT p50 of run 2 / run 1 per (arm, concurrency) of the two clean gpu-mla qualify runs, plus the table's."""
    p50 = {}
    for run in ("qualify-1", "qualify-2"):
        for line in (EVIDENCE / "h200-2026-12-04b" / run / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r["kind"] == "long_prefix":
                p50[(run, r["arm"], r["concurrency"])] = r["tpot"]["p50"]
    pairs = [(a, c) for (run, a, c) in p50 if run == "qualify-1"]
    return [p50[("qualify-2", a, c)] / p50[("qualify-1", a, c)] for a, c in pairs] + CAPACITY_REPEAT_RATIOS


def scenarios(sigma: float, count: int, rng: np.random.Generator) -> dict[str, tuple[int | None, list[list[float]]]]:
    """name -> (planted index or None, series): 20 clean runs; a 10 % slowdown from run k of 2k; larger steps at
    run 10 of 20 (the smallest one found at this noise in 20 nights)."""
    out = {"clean 20": (None, [np.exp(rng.normal(0, sigma, 20)).tolist() for _ in range(count)])}
    for step, k in ((0.10, 10), (0.10, 20), (0.10, 40), (0.20, 10), (0.30, 10), (0.40, 10)):
        series = []
        for _ in range(count):
            v = np.exp(rng.normal(0, sigma, 2 * k))
            v[k:] *= 1 + step
            series.append(v.tolist())
        out[f"+{step:.0%} at run {k} of {2 * k}"] = (k, series)
    return out


def harness_detect(series: list[list[float]]) -> list[list[int]]:
    return [[c.index for c in change_points(s)] for s in series]


def external_detect(python: str, which: str, series: list[list[float]]) -> list[list[int]]:
    proc = subprocess.run([python, "-c", ADAPTER, which, "0.001"], input=json.dumps(series), capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout)


def score(planted: int | None, found: list[list[int]]) -> str:
    n = len(found)
    anyc = sum(bool(f) for f in found) / n
    if planted is None:
        return f"false alarm {anyc:.3f}"
    exact = sum(planted in f for f in found) / n
    near = sum(any(abs(i - planted) <= 1 for i in f) for f in found) / n
    return f"found {anyc:.2f}, at run {exact:.2f}, within 1 {near:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--otava-python")
    ap.add_argument("--spa-python")
    args = ap.parse_args()
    logs = np.log(identical_run_ratios())
    rms = math.sqrt(float(np.mean(logs ** 2)) / 2)
    robust = float(np.median(np.abs(logs))) / 0.6745 / math.sqrt(2)
    print(f"identical H200 runs: {len(logs)} pairs, |ratio - 1| up to {np.max(np.abs(np.exp(logs) - 1)):.0%}; "
          f"per-run sigma of log TPOT {rms:.3f} (RMS), {robust:.3f} (median-based)")
    libraries = {"harness (ruptures + t-test)": harness_detect}
    if args.otava_python:
        libraries["apache-otava 0.8.0"] = lambda s: external_detect(args.otava_python, "otava", s)
    if args.spa_python:
        libraries["signal-processing-algorithms 2.1.6"] = lambda s: external_detect(args.spa_python, "spa", s)
    for sigma in (0.03, round(robust, 3), round(rms, 3)):
        sets = scenarios(sigma, args.series, np.random.default_rng(0))
        for name, (planted, series) in sets.items():
            for lib, detect in libraries.items():
                print(f"sigma {sigma:.3f} | {name:22} | {lib:36} | {score(planted, detect(series))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
