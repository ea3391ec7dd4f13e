"""The float32 anchor in every run against the floor test alone, by seeded simulation (issue 55's power gap;
docs/evidence/cpu-power-2026-12-07.md).

    PYTHONPATH=. .venv/bin/python benchmarks/anchor_run_sim.py [--seeds 400] [--checks 5]

A model of the CPU pair's noisy build (tests/anchor_lines.py): K = 5 clean calibration repeats and one judged run of
teacher forcing, the run-level factor of the candidate's noise Student t3, lognormal sigma 1, two-valued 80/20 or AR(1)
0.5 across the runs. Each judged run by (a) before: the floor test at alpha 0.01/m, the per-run budget as it stood
(the floor test the only part), (b) now: the floor test at its part (a quarter of the check's share where the anchor
judges too) and the float32 anchor at its quarter. Prints the clean false-fail rates, a legitimate build's, and the
power against a planted logit-scale fault: the smallest scale caught at 80 %.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.judge.calibration import held_out_budget, held_out_shifts, mean_floor, spread  # noqa: E402
from harness.judge.drift_floor import judge_floor_pairing  # noqa: E402
from harness.judge.error_budget import ANCHOR_PART, Family, RunBudget  # noqa: E402
from harness.judge.fp32_anchor import judge_run_anchor, level_of  # noqa: E402
from tests.anchor_lines import RUN_SHAPES, case, distances  # noqa: E402

SCALES = (0.0001, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003)


def verdicts(seed: int, shape: str, checks: int, **planted) -> tuple[bool, bool, bool]:
    """(before: floor test alone at 0.01/m, now: floor test at its part, now: float32 anchor) -- True where it fails."""
    c = case(seed, shape, **planted)
    repeats, judged = c.runs[:-1], c.runs[-1]
    family = Family(checks, "simulated")
    unit = held_out_budget(spread(repeats), family).unit
    now = RunBudget(family, unit, anchored=True)
    before = SimpleNamespace(alpha=family.alpha, unit=unit, family=family, text=family.text)
    shifts, floor = held_out_shifts(repeats), mean_floor(repeats)
    failed_before = not judge_floor_pairing(judged, floor, "cal", shifts, before).passed
    failed_floor = not judge_floor_pairing(judged, floor, "cal", shifts, now).passed
    d = distances(c)
    anchor = judge_run_anchor(d[-1], level_of(d[:-1]), now.part(ANCHOR_PART), now.text)
    return failed_before, failed_floor, not anchor.passed


def rates(seeds: int, shape: str, checks: int, **planted) -> tuple[float, float, float]:
    got = [verdicts(s, shape, checks, **planted) for s in range(seeds)]
    before = sum(b for b, _, _ in got) / seeds
    floor = sum(f for _, f, _ in got) / seeds
    either = sum(f or a for _, f, a in got) / seeds
    return before, floor, either


def smallest(rows: list[tuple[float, float]], power: float = 0.8) -> str:
    """The smallest scale caught at `power`, interpolated in log scale between the grid's points."""
    for (s1, p1), (s2, p2) in zip(rows, rows[1:], strict=False):
        if p1 >= power:
            return f"<= {s1:g}"
        if p1 < power <= p2:
            t = (power - p1) / (p2 - p1)
            return f"{math.exp(math.log(s1) + t * (math.log(s2) - math.log(s1))):.2g}"
    return f"> {rows[-1][0]:g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--checks", type=int, default=5)
    ap.add_argument("--run-scale", type=float, default=0.01)
    args = ap.parse_args(argv)
    n, m = args.seeds, args.checks
    print(f"m = {m} calibrated checks, K = 5, {n} seeds, run-level factor spread {args.run_scale:g}\n")
    print("| run-level shape | clean: before | clean: now (floor or anchor) | legitimate 1e-6 move: now |")
    print("|---|---|---|---|")
    for shape in RUN_SHAPES:
        clean = rates(n, shape, m, run_scale=args.run_scale)
        legit = rates(n, shape, m, run_scale=args.run_scale, legit=1e-6)
        print(f"| {shape} | {clean[0]:.2%} | {clean[2]:.2%} | {legit[2]:.2%} |")
    print("\n| logit scale | " + " | ".join(f"{s}: before / floor now / floor or anchor" for s in RUN_SHAPES) + " |")
    print("|---|" + "---|" * len(RUN_SHAPES))
    table = {shape: [] for shape in RUN_SHAPES}
    for scale in SCALES:
        cells = []
        for shape in RUN_SHAPES:
            r = rates(n, shape, m, run_scale=args.run_scale, scale=scale)
            table[shape].append((scale, r))
            cells.append(f"{r[0]:.0%} / {r[1]:.0%} / {r[2]:.0%}")
        print(f"| {scale:g} | " + " | ".join(cells) + " |")
    print("\nsmallest logit scale caught at 80 %:")
    for shape, rows in table.items():
        got = [smallest([(s, r[i]) for s, r in rows]) for i in range(3)]
        print(f"- {shape}: before {got[0]}, floor test now {got[1]}, floor test or anchor now {got[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
