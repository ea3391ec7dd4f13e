"""Re-judge stored runs against a known-good run with the current floor judgement (no server, no GPU).

    python benchmarks/floor_rejudge.py --floor reports/e2e-clean-064732 --arm gpu-dcp2 \
        reports/e2e-clean-repeat-070929 reports/e2e-lse_offset_1e-1-065220

    python benchmarks/floor_rejudge.py --floor RUN --arm gpu-mla-120k --run-arm FAULT_ARM \
        --checks long_context,long_prefix_outputs FAULT_RUN

For each run and each reference check (prefix_reuse, graph_replay, teacher_forcing; --checks adds long_context and
long_prefix_outputs), the paired floor test that `qualify` would apply had the first run been accepted with
`harness accept-floor`: the verdict, the sentence and the smallest detectable shift. Used to re-read device runs after
a change to harness/judge/drift_floor.py, and to ask what a floor would catch where qualify has none
(long_prefix_outputs). --run-arm: the runs' arm where it is named otherwise than the floor's (a planted-fault arm).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.judge.drift_floor import judge_against_floor
from harness.refcheck.judging.compare import RequestComparison
from harness.report.e2e_summary import CHECK_FILES, load_comparisons, read_lines

# Checks whose comparisons files e2e_summary does not read (RequestComparison lines, one file per reference).
MORE_CHECKS = {"long_context": "long_context_vs_*_comparisons.jsonl",
               "long_prefix_outputs": "long_prefix_outputs_vs_*_comparisons.jsonl"}


def comparisons(arm_dir: Path, checks: list[str]) -> dict[str, list]:
    found = {k: v for k, v in load_comparisons(arm_dir).items() if k in checks}
    for check in (c for c in checks if c in MORE_CHECKS):
        paths = sorted(arm_dir.glob(MORE_CHECKS[check]))
        if paths:
            found[check] = read_lines(paths[0], RequestComparison)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floor", type=Path, required=True, help="run directory of the known-good run")
    p.add_argument("--arm", required=True)
    p.add_argument("--run-arm", help="the runs' arm, where it is not --arm (default: --arm)")
    p.add_argument("--checks", default=",".join(CHECK_FILES),
                   help=f"comma-separated, of {', '.join([*CHECK_FILES, *MORE_CHECKS])}")
    p.add_argument("runs", type=Path, nargs="+")
    args = p.parse_args(argv)
    checks = args.checks.split(",")
    unknown = [c for c in checks if c not in CHECK_FILES and c not in MORE_CHECKS]
    if unknown:
        p.error(f"--checks: unknown {', '.join(unknown)}")
    run_arm = args.run_arm or args.arm
    floor = comparisons(args.floor / args.arm, checks)
    floor_name = f"the accepted run {args.floor.name}"
    failed = False
    for check in checks:
        for run in args.runs:
            cand = comparisons(run / run_arm, checks).get(check)
            if not floor.get(check) or not cand:
                missing = args.floor / args.arm if not floor.get(check) else run / run_arm
                print(f"{run.name} {check}: FAIL (no data): no {check} comparisons in {missing}")
                failed = True
                continue
            j = judge_against_floor(cand, floor[check], floor_name)
            print(f"{run.name} {check}: {'PASS' if j.passed else 'FAIL'}\n  {j.sentence}\n  {j.detectable}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
