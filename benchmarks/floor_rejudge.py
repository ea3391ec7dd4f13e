"""Re-judge stored runs against a known-good run with the current floor judgement (no server, no GPU).

    python benchmarks/floor_rejudge.py --floor reports/e2e-clean-064732 --arm gpu-dcp2 \
        reports/e2e-clean-repeat-070929 reports/e2e-lse_offset_1e-1-065220

For each run and each reference check (prefix_reuse, graph_replay, teacher_forcing), the paired floor test that
`qualify` would apply had the first run been accepted with `harness accept-floor`: the verdict, the sentence and
the smallest detectable shift. Used to re-read device runs after a change to harness/judge/drift_floor.py.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from harness.judge.drift_floor import judge_against_floor
from harness.refcheck.floor_store import load_floor, save_floor

CHECKS = ("prefix_reuse", "graph_replay", "teacher_forcing")


def comparisons_file(run: Path, arm: str, check: str) -> Path | None:
    # graph_replay and teacher_forcing name the reference they compared with; prefix_reuse does not
    found = sorted((run / arm).glob(f"{check}_vs_*_comparisons.jsonl")) or \
        sorted((run / arm).glob(f"{check}_comparisons.jsonl"))
    return found[0] if found else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floor", type=Path, required=True, help="run directory of the known-good run")
    p.add_argument("--arm", required=True)
    p.add_argument("runs", type=Path, nargs="+")
    args = p.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for check in CHECKS:
            src = comparisons_file(args.floor, args.arm, check)
            if src is None:
                print(f"{check}: FAIL (no data): no comparisons in {args.floor / args.arm}")
                failed = True
                continue
            save_floor(Path(tmp), check, src, {"run": args.floor.name})
            floor = load_floor(Path(tmp), check)
            for run in args.runs:
                file = comparisons_file(run, args.arm, check)
                if file is None:
                    print(f"{run.name} {check}: FAIL (no data): no comparisons file")
                    failed = True
                    continue
                cand = load_floor(_stage(Path(tmp) / run.name, check, file, run.name), check)
                j = judge_against_floor(cand.comparisons, floor.comparisons, floor.name)
                print(f"{run.name} {check}: {'PASS' if j.passed else 'FAIL'}\n  {j.sentence}\n  {j.detectable}")
    return 1 if failed else 0


def _stage(directory: Path, check: str, file: Path, run: str) -> Path:
    """The candidate's comparisons read through the same loader as a floor (same record types, same filtering)."""
    save_floor(directory, check, file, {"run": run})
    return directory


if __name__ == "__main__":
    raise SystemExit(main())
