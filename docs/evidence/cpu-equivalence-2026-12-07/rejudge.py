"""Re-judge the runs of benchmarks/equivalence_evidence.py (no server): each run's run-level floor verdict against the
calibration it ran under, first at 1 % per check (the code the runs ran, before 209b06e), then under the per-run budget
of harness/judge/error_budget.py (209b06e: alpha 0.01/m over the m checks calibrated for the arm, the lognormal shape
factor, the rounding unit). Run with the harness importable and HARNESS_REFERENCE_DIR the evidence's store:

    HARNESS_REFERENCE_DIR=/tmp/eqv/work1/references PYTHONPATH=. python docs/evidence/cpu-equivalence-2026-12-07/rejudge.py \
        /tmp/eqv/work1
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from harness.judge.drift_floor import mean_shift, run_level_bound
from harness.judge.error_budget import Family, RunBudget, unit_of
from harness.records.jsonl import read_jsonl
from harness.records.schema import comparison_model
from harness.refcheck.store.accept_floor import floor_here
from harness.refcheck.store.floor_store import load_floor

RUNS = ("clean-200", "clean-202", "legit-split-k-202", "fault-scale-0.001", "fault-keys-past-2048")


def main(work: Path) -> int:
    calibration = json.loads((work / "reports" / "eq-cal" / "calibration.json").read_text())
    spreads = {c["check"]: c["spread"] for c in calibration["checks"]}
    family = Family(len(spreads), f"the {len(spreads)} checks calibrated for {calibration['arm']}")
    print("| run | check | shift | as it ran (1 % per check): bound | verdict | per-run budget: bound | verdict |")
    print("|---|---|---|---|---|---|---|")
    for run in RUNS:
        results = work / "reports" / run / "results.jsonl"
        if not results.is_file():
            continue
        for line in results.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") != "reference_check" or rec["check"] not in spreads:
                continue
            check, spread = rec["check"], spreads[rec["check"]]
            model = comparison_model(check)
            rows = [model.model_validate(r) for r in read_jsonl(Path(rec["comparisons_path"]))[0]]
            shift = mean_shift(rows, load_floor(floor_here(rec["floor_path"]), check).comparisons)
            ran = re.search(r"prediction bound ([-+][\d.e+-]+)", rec.get("floor") or "")
            budget = run_level_bound(spread["floor_shifts"], RunBudget(family, unit_of(spread)))[0]
            print(f"| {run} | {check} | {shift:+.3g} | {ran[1] if ran else 'n/a'} | {(rec.get('floor') or '')[:4]} "
                  f"| {budget:+.3g} | {'PASS' if shift <= budget else 'FAIL'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
