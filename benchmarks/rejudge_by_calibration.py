"""Re-judge a stored run's reference checks by an arm's stored calibration, as `calibrate` judges a repeat
(harness/calibrate/trust.py against_current: the calibration's drift limit and tie gap per request, then the paired
floor test at the run's error budget). No server, no GPU.

    HARNESS_REFERENCE_DIR=STATE/references python benchmarks/rejudge_by_calibration.py --arm gpu-mla RUN...

For a run made under a changed configuration of the arm (`--set server.env...`: another calibration key, so qualify
judged it "not calibrated") that must still agree with the arm in exact arithmetic, such as VLLM_BATCH_INVARIANT=1.
Each check is judged by the one calibration of `--arm` that holds it (refused where none or several do); the tie-flip
cap and the float32 run anchor of qualify are not applied here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.calibrate.trust import against_current
from harness.records.schema import comparison_model
from harness.refcheck.store.floor_store import load_calibration, load_floor
from harness.refcheck.store.reference_store import reference_dir
from harness.report.e2e_summary import read_lines

# The comparisons file of each reference check in a run's arm directory.
COMPARISONS = {"prefix_reuse": "prefix_reuse_comparisons.jsonl",
               "graph_replay": "graph_replay_vs_*_comparisons.jsonl",
               "graph_replay_eager": "graph_replay_eager_vs_*_comparisons.jsonl",
               "teacher_forcing": "teacher_forcing_vs_*_comparisons.jsonl"}


def calibration_dir(arm: str, check: str) -> Path:
    found = sorted(p.parent for p in (reference_dir() / "floors").glob(f"{arm}-*/{check}.calibration.json"))
    if len(found) != 1:
        raise SystemExit(f"{check}: {len(found)} calibrations of {arm} under {reference_dir() / 'floors'} "
                         "(one is needed)")
    return found[0]


def rejudge(run: Path, arm: str) -> list[tuple[str, str]]:
    """(check, verdict sentence) for every reference check the run's arm directory holds."""
    out = []
    for check, pattern in COMPARISONS.items():
        files = sorted((run / arm).glob(pattern))
        if not files:
            continue
        comparisons = read_lines(files[0], comparison_model(check))
        where = calibration_dir(arm, check)
        current = load_calibration(where, check)
        failure = against_current(check, comparisons, current, load_floor(where, check), where)
        if failure is not None and not failure.startswith("FAIL"):
            failure = f"FAIL: {failure}"
        out.append((check, failure or "PASS"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arm", required=True, help="the arm whose stored calibration judges")
    p.add_argument("runs", nargs="+", type=Path)
    args = p.parse_args(argv)
    failed = False
    for run in args.runs:
        verdicts = rejudge(run, args.arm)
        if not verdicts:
            print(f"{run}: no reference check comparisons under {run / args.arm}: FAIL (nothing to judge)")
            failed = True
        for check, verdict in verdicts:
            print(f"{run.name} {check}: {verdict}")
            failed |= verdict != "PASS"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
