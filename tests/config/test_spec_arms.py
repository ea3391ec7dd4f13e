"""The speculative arms' outputs, not only their acceptance (issue 57 item 1): every one-GPU speculative arm runs with
CUDA graphs (vLLM's default, FULL for the verify batches) and names its eager twin, the same drafter under
--enforce-eager; every output check the target runs is run on a speculative candidate too (no suite but spec_decode
looks at the drafter to decide). Read from the shipped configs/arms."""

from __future__ import annotations

import pytest

from harness.config.arms import ARMS_DIR, load_arm, resolve_raw
from harness.config.suites import BY_NAME, SUITES, default_suites, workload_keys

ONE_GPU_SPEC = ("gpu-mtp", "gpu-draft")


@pytest.mark.parametrize("name", ONE_GPU_SPEC)
def test_a_one_gpu_spec_arm_runs_graphs_and_names_its_eager_twin(name):
    arm = load_arm(name, geometry=False)
    twin = load_arm(arm.eager_variant, geometry=False)
    assert arm.speculative is not None and not arm.server.enforce_eager
    assert twin.server.enforce_eager and twin.eager_variant is None
    assert twin.speculative == arm.speculative and twin.reference == arm.reference
    assert twin.model == arm.model  # the same target: only the graphs differ


def test_every_shipped_spec_arm_with_graphs_has_an_eager_twin():
    for path in sorted(ARMS_DIR.glob("*.yaml")):
        raw, _ = resolve_raw(path.stem)
        if raw.get("speculative") is None or raw.get("device", "gpu") != "gpu":
            continue
        server = raw.get("server") or {}
        if server.get("enforce_eager") is False and (raw.get("parallelism") or {}).get("tp", 1) == 1:
            assert raw.get("eager_variant"), f"{path.name}: a CUDA-graph spec arm without its eager twin"


def test_every_output_check_of_the_target_runs_on_a_speculative_candidate():
    # the static skip rules: a drafter only adds spec_decode, it never removes a suite
    assert set(workload_keys(default_suites(), speculative=True)) >= set(workload_keys(default_suites(), False))
    assert [s.name for s in SUITES if not s.runs_for(True)] == []
    assert BY_NAME["output_coverage"].runs_for(True) and BY_NAME["long_context"].runs_for(True)


def test_output_coverage_does_not_skip_a_speculative_candidate():
    from types import SimpleNamespace

    from suites.test_output_coverage import skip_reason

    session = SimpleNamespace(reference_of=lambda arm: load_arm(arm, geometry=False).reference)
    for arm in ("cpu-spec", *ONE_GPU_SPEC):
        assert skip_reason(session, SimpleNamespace(arm=arm), served=False) is None, arm
