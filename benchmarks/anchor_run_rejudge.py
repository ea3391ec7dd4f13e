"""Re-judge the real runs of benchmarks/anchor_run_power.py (no server): each run's teacher_forcing against the K clean
calibration repeats, by the floor test alone at the per-run budget as it stood (alpha 0.01/m), by the floor test at
its part now, and by the float32 anchor at its part; then the smallest logit scale each catches at 80 %, from the
measured rise per unit scale and the runs' own spread.

    PYTHONPATH=. .venv/bin/python benchmarks/anchor_run_rejudge.py --work /tmp/apower [--checks 5] [--fixture F]

--checks: the family m the CPU pair judges (its five calibrated checks: long_context, long_context_bursts,
prefix_reuse, graph_replay, teacher_forcing). --fixture: also write what a unit test re-judges the runs from (cpu-ref's
logprobs and their float32 scores, each run's teacher-forced candidate logprobs).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from statistics import NormalDist
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.judge.calibration import held_out_budget, held_out_shifts, mean_floor, spread  # noqa: E402
from harness.judge.drift_floor import judge_floor_pairing, mean_shift, run_level_bound  # noqa: E402
from harness.judge.error_budget import ANCHOR_PART, POWER, Family, RunBudget  # noqa: E402
from harness.judge.fp32_anchor import caught_shift, fp32_distance, judge_run_anchor, level_of  # noqa: E402
from harness.records.schema import comparison_model  # noqa: E402
from harness.refcheck.judging.run_anchor import anchor_inputs  # noqa: E402
from harness.report.e2e_summary import read_lines  # noqa: E402

CHECK = "teacher_forcing"


def comparisons(run: Path) -> tuple[list, str]:
    for line in (run / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "reference_check" and rec["check"] == CHECK:
            return read_lines(Path(rec["comparisons_path"]), comparison_model(CHECK)), rec["reference_key"]
    raise SystemExit(f"{run}: no {CHECK} record")


def scale_of(name: str) -> float:
    return float(name.split("-", 1)[1]) if name.startswith("scale-") else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--checks", type=int, default=5)
    ap.add_argument("--fixture", type=Path, default=None)
    args = ap.parse_args(argv)
    reports = args.work / "reports"
    repeats_dirs = sorted(reports.glob("cal-r*"), key=lambda p: int(p.name.removeprefix("cal-r")))
    repeats = [comparisons(d)[0] for d in repeats_dirs]
    key = comparisons(repeats_dirs[0])[1]
    inputs = anchor_inputs(args.work / "references", "cpu-ref", key, "cpu-noisy")
    if isinstance(inputs, str):
        raise SystemExit(inputs)
    cal_d = [fp32_distance(k, r, *inputs) for k, r in enumerate(repeats, 1)]
    if args.fixture is not None:
        write_fixture(args.fixture, reports, inputs)
    level = level_of(cal_d)
    family = Family(args.checks, f"the CPU pair's {args.checks} calibrated checks")
    unit = held_out_budget(spread(repeats), family).unit
    now = RunBudget(family, unit, anchored=True)
    before = SimpleNamespace(alpha=family.alpha, unit=unit, family=family, text=family.text)
    floor, shifts = mean_floor(repeats), held_out_shifts(repeats)
    print(f"calibration: K = {len(repeats)}, held-out shifts {', '.join(f'{s:+.2g}' for s in shifts)}; "
          f"excess over cpu-ref's distance {', '.join(f'{d.excess:.4g}' for d in cal_d)} (level {level.level:.4g}, "
          f"the build's distance {level.distance:.4g}, cpu-ref's {cal_d[0].reference:.3g})")
    bound_before = run_level_bound(shifts, before)[0]
    bound_now = run_level_bound(shifts, now)[0]
    print(f"floor bounds: before {bound_before:+.3g} (alpha {family.alpha:.2g}), now {bound_now:+.3g} "
          f"(alpha {now.alpha:.2g}); anchor at alpha {now.part(ANCHOR_PART):.2g}\n")
    print("| run | shift of mean \\|delta\\| | floor before | floor now | excess | anchor limit | anchor | "
          "rise of the excess |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    names = sorted((d.name for d in reports.iterdir() if d.name.startswith(("clean-", "scale-", "legit-"))),
                   key=lambda n: (not n.startswith("clean"), n.startswith("legit"), scale_of(n), n))
    for name in names:
        if not (reports / name / "results.jsonl").is_file():
            continue
        run = comparisons(reports / name)[0]
        shift = mean_shift(run, floor)
        fb = judge_floor_pairing(run, floor, "cal", shifts, before).passed
        fn = judge_floor_pairing(run, floor, "cal", shifts, now).passed
        d = fp32_distance(len(repeats) + 1, run, *inputs)
        a = judge_run_anchor(d, level, now.part(ANCHOR_PART), now.text)
        limit = float(a.sentence.split(" = the calibration's")[0].rsplit(" ", 1)[1])
        rise = d.excess - level.level
        rows.append((name, shift, rise, d))
        print(f"| {name} | {shift:+.3g} | {'PASS' if fb else 'FAIL'} | {'PASS' if fn else 'FAIL'} | {d.excess:.4g} | "
              f"{limit:.4g} | {'PASS' if a.passed else 'FAIL'} | {rise:+.3g} |")
    # power from the measured moves: shift and rise per unit scale (least squares through the clean level)
    faults = [(scale_of(n), s, r) for n, s, r, _ in rows if n.startswith("scale-")]
    clean = [(s, r) for n, s, r, _ in rows if n.startswith("clean-")]
    if faults and clean:
        c_shift = statistics.fmean(s for s, _ in clean)
        c_rise = statistics.fmean(r for _, r in clean)
        z80 = NormalDist().inv_cdf(POWER)
        sd = statistics.stdev(shifts) * (len(shifts) - 1) / len(shifts)
        floor_needed = {name: b - statistics.fmean(shifts) + z80 * sd * math.sqrt(1 + 1 / len(shifts))
                        for name, b in (("before", bound_before), ("now", bound_now))}
        se = statistics.fmean(d.standard_error for *_, d in rows)
        anchor_needed = caught_shift(rows[0][3], level, now.part(ANCHOR_PART))
        print(f"\nneeded at 80 %: floor shift before {floor_needed['before']:.3g}, now {floor_needed['now']:.3g}; "
              f"anchor rise {anchor_needed:.3g} (standard error {se:.2g})")
        print("| scale | shift - clean | rise - clean |\n|---|---|---|")
        for scale, s, r in faults:
            print(f"| {scale:g} | {s - c_shift:+.3g} | {r - c_rise:+.3g} |")
        for what, col, needed in (("floor before", 1, floor_needed["before"]), ("floor now", 1, floor_needed["now"]),
                                  ("anchor", 2, anchor_needed)):
            found = interpolate(faults, col, needed, (c_shift, c_rise)[col - 1])
            print(f"smallest scale caught at 80 % ({what}): {found}")
    return 0


def write_fixture(path: Path, reports: Path, inputs: tuple[dict, dict]) -> None:
    kept = ("cal-r", "clean-", "scale-", "legit-")
    runs = {d.name: {c.request: c.candidate_logprobs for c in comparisons(d)[0]} for d in sorted(reports.iterdir())
            if d.name.startswith(kept) and (d / "results.jsonl").is_file()}
    path.write_text(json.dumps({"reference": inputs[0], "fp32": inputs[1], "runs": runs}, separators=(",", ":")) + "\n")


def interpolate(faults: list[tuple[float, float, float]], col: int, needed: float, clean: float) -> str:
    """The scale whose measured move (over the clean runs') reaches `needed`, linear between the measured scales."""
    points = [(0.0, 0.0)] + sorted((f[0], f[col] - clean) for f in faults)
    for (s1, m1), (s2, m2) in zip(points, points[1:], strict=False):
        if m1 < needed <= m2:
            return f"{s1 + (needed - m1) / (m2 - m1) * (s2 - s1):.2g}"
    return f"> {points[-1][0]:g} (largest measured move {points[-1][1]:.3g})"


if __name__ == "__main__":
    sys.exit(main())
