"""output_coverage's KV families on a KV-capped twin (harness/config/kv_twin.py, admission in
harness/admission/workloads.py): every GPU arm gets one, its `--num-gpu-blocks-override N` computed from its workload
and its preflight clean; the CPU pair keeps its own cap, which the same computation gives; a twin that cannot serve
the families is refused at admission naming the arm and field; and on the twin a burst with no preemption proven, or
a pool the burst fits (the cap not applied), reads no data (FAIL), never PASS."""

from __future__ import annotations

import json
from math import ceil
from types import SimpleNamespace

import pytest

from harness.admission.workloads import chosen_workload, kv_twins, kv_verdicts
from harness.config.arms import known_arms, load_arm
from harness.config.kv_twin import (
    KvSizing,
    kv_twin,
    needed_blocks,
    needs_twin,
    pinned_block_size,
    pool_problems,
    twin_name,
)
from harness.pytest_plugin.grouping import phase
from harness.refcheck.judging.comparisons import record_fields
from harness.refcheck.prompts.coverage_cells import CoverageCell
from harness.refcheck.send.coverage_send import kv_pressure
from harness.serve.launch import plan_for
from tests.refcheck.test_coverage_send import Scripted, reference_for

# The tiny DeepseekV3 (MLA) geometry the GPU arms run (tests/config/test_arms.py's): their model directory is
# generated on the device, so each arm is loaded here with model.path pointing at this config.json.
TINY_MLA = {"model_type": "deepseek_v3", "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 163840}
GPU_ARMS = sorted(a for a in known_arms() if a.startswith("gpu-"))
# The caps worked out by hand from each workload (docs/suites.md): requests x ceil((prompt + 1) / block tokens) + 2.
EXPECTED = {"output_coverage_gpu": {1: 11 * ceil(4001 / 16) + 2, 2: 11 * ceil(4001 / 32) + 2},
            "output_coverage_gpu_120k": {1: 16 * ceil(8001 / 16) + 2}}


@pytest.fixture(scope="module")
def mla_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-mla")
    (d / "config.json").write_text(json.dumps(TINY_MLA))
    return d


def gpu_arm(name, mla_dir, *overrides):
    return load_arm(name, [f"model.path={mla_dir}", *overrides])


@pytest.mark.parametrize("name", GPU_ARMS)
def test_every_gpu_arm_runs_the_kv_families_on_a_twin_whose_argv_carries_the_computed_cap(name, mla_dir):
    arm = gpu_arm(name, mla_dir)
    w = chosen_workload(arm, "output_coverage")
    twin = kv_twin(arm, w)
    assert twin is not None and twin.name == twin_name(name) == f"{name}.kv-twin"
    block = pinned_block_size(arm) or 16
    tokens = block * arm.parallelism.dcp
    n = w.pressure.requests * ceil((w.pressure.prompt_tokens + 1) / tokens) + 2
    if pinned_block_size(arm) is None:
        assert n == EXPECTED[w.name][arm.parallelism.dcp]
    argv = plan_for(twin).nodes[0].argv
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == str(n)
    assert argv[argv.index("--block-size") + 1] == str(block)
    # the twin is the arm: only its name, description, eager variant and KV cap differ
    same = {"name", "description", "eager_variant", "server"}
    assert twin.model_dump(exclude=same) == arm.model_dump(exclude=same)
    assert twin.server.model_dump(exclude={"kv_cache_blocks", "args"}) == arm.server.model_dump(
        exclude={"kv_cache_blocks", "args"})
    # preflight passes; the cap holds max_model_len, admits the burst, is overflowed by it, and the fill turns it over
    assert plan_for(twin).ok, [v for v in plan_for(twin).verdicts if not v.ok]
    sizing = KvSizing(n, block, arm.parallelism.dcp, "test")
    assert pool_problems(sizing, w, arm.model.max_model_len) == []
    (verdict,) = kv_verdicts(arm, w)
    assert verdict.ok and f"twin {name}.kv-twin, --num-gpu-blocks-override {n:,}" in verdict.detail, verdict.detail
    assert "preemption is certain" in verdict.detail


def test_admission_adds_each_candidates_twin_only_where_output_coverage_runs(mla_dir):
    arms = [gpu_arm(n, mla_dir) for n in ("gpu-mla", "gpu-dcp2")]
    twins = kv_twins(arms, ["output_coverage", "gsm8k"])
    assert sorted(twins) == ["gpu-dcp2.kv-twin", "gpu-mla.kv-twin"]
    assert twins["gpu-dcp2.kv-twin"].server.kv_cache_blocks == 1388
    assert kv_twins(arms, ["gsm8k", "long_context"]) == {}


def test_the_cpu_pair_keeps_its_own_cap_which_the_same_computation_gives():
    smoke = load_arm("cpu-smoke")
    w = chosen_workload(smoke, "output_coverage")
    # cpu-smoke's hand-measured 200 blocks (configs/arms/cpu-smoke.yaml) is exactly what the twin sizing computes
    assert needed_blocks(w, smoke.model.max_model_len, 128) == smoke.server.kv_cache_blocks == 200
    assert not needs_twin(smoke, w) and kv_twin(smoke, w) is None
    (verdict,) = kv_verdicts(smoke, w)
    assert verdict.ok and "on the arm itself" in verdict.detail and "9 x 23 = 207 > 199 usable" in verdict.detail
    # an uncapped CPU arm (cpu-spec) gets a twin at the same 200 blocks
    spec = load_arm("cpu-spec")
    assert kv_twin(spec, chosen_workload(spec, "output_coverage")).server.kv_cache_blocks == 200


def test_a_cap_the_burst_fits_is_replaced_by_a_twin_and_a_twin_that_cannot_serve_is_refused_naming_the_field(mla_dir):
    smoke = load_arm("cpu-smoke", ["server.kv_cache_blocks=1000"])  # planted: the burst fits 1,000 blocks
    w = chosen_workload(smoke, "output_coverage")
    assert needs_twin(smoke, w) and kv_twin(smoke, w).server.kv_cache_blocks == 200
    arm = gpu_arm("gpu-mla", mla_dir)
    w = chosen_workload(arm, "output_coverage")
    # planted: three requests cannot make a pool that holds max_model_len 40,960
    few = w.model_copy(update={"pressure": w.pressure.model_copy(update={"requests": 3})})
    (verdict,) = kv_verdicts(arm, few)
    assert not verdict.ok and verdict.rule == "coverage_kv_cap"
    assert "arm 'gpu-mla': workloads.output_coverage (configs/workloads/output_coverage_gpu.yaml)" in verdict.detail
    assert "less than max_model_len 40,960" in verdict.detail and "pressure.requests" in verdict.detail
    # planted: a fill that needs more than max_fill_tokens
    small = w.model_copy(update={"recycled": w.recycled.model_copy(update={"max_fill_tokens": 1000})})
    assert "recycled.max_fill_tokens" in kv_verdicts(arm, small)[0].detail
    # planted: no block size anywhere: the cap cannot be counted
    unknown = w.model_copy(update={"block_size": None})
    (verdict,) = kv_verdicts(arm, unknown)
    assert not verdict.ok and "--block-size N" in verdict.detail and "block_size in" in verdict.detail
    assert kv_twins([arm.model_copy(update={"workloads": arm.workloads})], ["output_coverage"]) != {}


def test_on_the_twin_a_burst_without_a_preemption_or_on_a_pool_it_fits_reads_no_data(tmp_path, mla_dir):
    arm = gpu_arm("gpu-mla", mla_dir)
    w = chosen_workload(arm, "output_coverage")
    twin = kv_twin(arm, w)
    pool = twin.server.kv_cache_blocks * 16
    p = w.pressure
    cs = [CoverageCell(f"kv_pressure-{i}", "kv_pressure", [5] * p.prompt_tokens, p.output_tokens)
          for i in range(p.requests)]
    ref = reference_for(cs)
    proven = kv_pressure(Scripted(tmp_path, ref, pool=pool, block=16, preempt_per_send=2), cs, ref)
    assert proven.unproven == [] and proven.preemptions == 2
    fields = record_fields("kv_pressure", "gpu-mla-ref", "k", proven.compared, 2.0, tmp_path / "c.jsonl",
                           proven.unproven)
    assert fields.passed
    # planted: the counter never rose (the cap did not bite): FAIL, every output equal or not
    unmoved = kv_pressure(Scripted(tmp_path, ref, pool=pool, block=16), cs, ref)
    assert any("did not rise" in e for e in unmoved.unproven), unmoved.unproven
    assert not record_fields("kv_pressure", "gpu-mla-ref", "k", unmoved.compared, 2.0, tmp_path / "c.jsonl",
                             unmoved.unproven).passed
    # planted: the server ignored the override (its whole pool: 54.9M tokens on an H200): the burst fits it
    ignored = kv_pressure(Scripted(tmp_path, ref, pool=54_936_864, block=16, preempt_per_send=1), cs, ref)
    assert any("fits the KV pool of 54,936,864 tokens" in e for e in ignored.unproven), ignored.unproven


def test_the_twins_tests_run_last_in_the_candidates_turn():
    def item(*fixtures):
        return SimpleNamespace(fixturenames=fixtures)

    for parallel in (False, True):
        others = [phase(item(*f), parallel) for f in (("coverage_outputs", "candidate"), ("served_arm",), ())]
        assert phase(item("coverage_outputs", "kv_capped"), parallel) > max(others)


def test_qualify_admits_the_twin_with_the_run_and_refuses_one_that_cannot_serve_with_one_message(tmp_path):
    """qualify's own admission (no server started): an uncapped CPU candidate's twin joins the run's arms (so the
    session can launch it); a candidate whose twin could not hold max_model_len is refused naming arm and field."""
    from harness.admission.admitting import admit_run
    from harness.admission.request import QualifyRequest
    from harness.config.errors import PreflightError

    def admit(*overrides):
        return admit_run(QualifyRequest(arm="cpu-smoke", suites="output_coverage", vllm_check=False,
                                        run_dir=str(tmp_path / f"run{len(overrides)}"), overrides=overrides))

    assert "cpu-smoke.kv-twin" not in admit().arms.loaded  # its own 200 blocks serve: no twin, no server more
    run = admit("server.kv_cache_blocks=null")
    twin = run.arms.loaded["cpu-smoke.kv-twin"]
    assert twin.server.kv_cache_blocks == 200 and run.arms.owner(twin).name == "cpu-smoke"
    assert [a.name for a in run.arms.run_arms] == ["cpu-smoke", "cpu-ref"]  # not an arm with tests of its own
    # planted: a max_model_len the 200-block twin cannot hold
    with pytest.raises(PreflightError) as refused:
        admit("server.kv_cache_blocks=null", "model.max_model_len=32768")
    assert "coverage_kv_cap: arm 'cpu-smoke': workloads.output_coverage" in str(refused.value)
    assert "less than max_model_len 32,768" in str(refused.value)
