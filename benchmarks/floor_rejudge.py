"""Re-judge stored runs against a known-good run with the current floor judgement (no server, no GPU).

    python benchmarks/floor_rejudge.py --floor reports/e2e-clean-064732 --arm gpu-dcp2 \
        reports/e2e-clean-repeat-070929 reports/e2e-lse_offset_1e-1-065220

For each run and each reference check (prefix_reuse, graph_replay, teacher_forcing), the paired floor test that
`qualify` would apply had the first run been accepted with `harness accept-floor`: the verdict, the sentence and
the smallest detectable shift. Used to re-read device runs after a change to harness/judge/drift_floor.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.judge.drift_floor import judge_against_floor
from harness.report.e2e_summary import CHECK_FILES, load_comparisons


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floor", type=Path, required=True, help="run directory of the known-good run")
    p.add_argument("--arm", required=True)
    p.add_argument("runs", type=Path, nargs="+")
    args = p.parse_args(argv)
    floor = load_comparisons(args.floor / args.arm)
    floor_name = f"the accepted run {args.floor.name}"
    failed = False
    for check in CHECK_FILES:
        for run in args.runs:
            cand = load_comparisons(run / args.arm).get(check)
            if not floor.get(check) or not cand:
                missing = args.floor if not floor.get(check) else run
                print(f"{run.name} {check}: FAIL (no data): no {check} comparisons in {missing / args.arm}")
                failed = True
                continue
            j = judge_against_floor(cand, floor[check], floor_name)
            print(f"{run.name} {check}: {'PASS' if j.passed else 'FAIL'}\n  {j.sentence}\n  {j.detectable}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
