"""Re-judge the K=5 calibration's fresh clean runs and faulty repeats with the run-level floor test (no server):

    cd docs/evidence/cpu-calibration-k5-2026-12-05 && python rejudge.py /tmp/calibration-false-positives

reads <work>/reports/fp-cal-r1..r5 (the calibration's repeats), clean-200, clean-201 and fp-fault-r1, r2
(the faulty build's refused repeats) as benchmarks/calibration_false_positives.py left them, and prints per check
the held-out shifts, the 99 % run-level bound and each run's shift and verdict, beside the paired tests' verdict.
"""

import json
import sys
from pathlib import Path

from harness.judge.calibration import held_out_shifts, mean_floor
from harness.judge.drift_floor import judge_against_floor, judge_run_level, mean_shift, run_level_bound
from harness.records.schema import comparison_model

CHECKS = ("graph_replay", "teacher_forcing", "prefix_reuse", "long_context", "long_context_bursts")
RUNS = ("clean-200", "clean-201", "fp-fault-r1", "fp-fault-r2")


def load(reports: Path, run: str, check: str):
    path = next((reports / run / "cpu-noisy").glob(f"{check}_*comparisons.jsonl"))
    model = comparison_model(check)
    return [model.model_validate(json.loads(line)) for line in path.read_text().splitlines()]


def main(work: Path) -> None:
    reports = work / "reports"
    print("| Check | Held-out shifts (K=5) | 99 % bound | " + " | ".join(RUNS) + " |")
    print("|---|---|---|" + "---|" * len(RUNS))
    for check in CHECKS:
        repeats = [load(reports, f"fp-cal-r{k}", check) for k in range(1, 6)]
        shifts = held_out_shifts(repeats)
        floor = mean_floor(repeats)
        bound = run_level_bound(shifts)[0]
        cells = []
        for run in RUNS:
            mine = load(reports, run, check)
            level = judge_run_level(mine, floor, "cal", shifts).passed
            paired = judge_against_floor(mine, floor, "cal").passed
            verdicts = ("PASS" if level else "FAIL", "PASS" if paired else "FAIL")
            cells.append(f"{mean_shift(mine, floor):+.2e}: {verdicts[0]} (paired {verdicts[1]})")
        print(f"| {check} | {', '.join(f'{s:+.1e}' for s in shifts)} | {bound:+.2e} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
