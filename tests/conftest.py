"""Shared helpers for the harness's own tests."""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
from pathlib import Path

import pytest

from harness.config.arms import WorkloadChoice
from harness.config.paths import REPO_ROOT

# Every qualify a test runs appends to one history store of this test session (both xdist workers share the run's
# uid), never to the repository's reports/history.sqlite.
os.environ.setdefault("HARNESS_HISTORY", str(Path(tempfile.gettempdir()) / "dcp-harness-test-history-{}.sqlite".format(
    os.environ.get("PYTEST_XDIST_TESTRUNUID") or os.getpid())))

TINY_MODEL = REPO_ROOT / "models" / "tiny-llama"
CPU_WORKLOADS = {"long_prefix": "long_prefix_cpu", "gsm8k": "gsm8k_cpu", "reference_checks": "reference_checks_cpu",
                 "spec_decode": "spec_decode_cpu", "long_context": "long_context_cpu", "ruler": "ruler_cpu",
                 "capacity": "capacity_cpu", "output_coverage": "output_coverage_cpu",
                 "concurrent_prefills": "concurrent_prefills_cpu"}


@pytest.fixture
def arms_dir(tmp_path: Path):
    """A scratch configs/arms with a tiny local model; returns (dir, write(name, yaml_text))."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(
        {"num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
         "qk_rope_head_dim": 64, "max_position_embeddings": 8192}))
    d = tmp_path / "arms"
    d.mkdir()

    def write(name: str, text: str) -> Path:
        path = d / f"{name}.yaml"
        path.write_text(textwrap.dedent(text).replace("MODEL_DIR", str(model)))
        return path

    # The CPU workloads, which fit max_model_len 4096: `plan` checks every suite's workload, as a `qualify` of all
    # suites does (a family this schema does not know yet is left out).
    chosen = {k: v for k, v in CPU_WORKLOADS.items() if k in WorkloadChoice.model_fields}
    write("base", f"""
        model: {{path: MODEL_DIR, served_name: m, max_model_len: 4096}}
        parallelism: {{tp: 8}}
        workloads: {json.dumps(chosen)}
    """)
    return d, write


# Under CI=true a skip not on tests/ci_allowed_skips.yaml fails the run (tests/ci_skips.py).
from ci_skips import pytest_configure, pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402,F401

# The unit tests that each take 30 s or more on 2 cores (measured, --durations): started first, longest first, so that
# under pytest-xdist they overlap the short ones instead of leaving one worker alone at the end (the session's tail was
# the 112 s determinism test). Order only: every test runs either way. Listed by the durations of a unit session on 2
# loaded cores (2026-12-07: 80-390 s there, ~6x CI's).
SLOW_FIRST = ("tests/tinymodel/test_circuit.py::test_mla_circuit_copies_needles_leaves_ordinary_text_and_fails_off_by_one",
              "tests/tinymodel/test_determinism.py::test_two_generations_give_the_same_weights_hash",
              "tests/history/test_nightly_check.py::test_the_same_nights_without_the_slowdown_pass_every_night_they_can_"
              "judge",
              "tests/history/test_nightly_check.py::test_planted_slowdown_fails_from_its_third_night_naming_the_run_it_"
              "entered",
              "tests/pytest_plugin/test_parallel.py::test_two_candidates_and_their_shared_reference_each_run_in_one_worker",
              "tests/measure/test_ruler.py::test_samples_are_lm_evals_own_and_the_same_every_time",
              "tests/opcheck/test_runner_cpu.py::test_runner_on_cpu_ranks",
              "tests/pytest_plugin/test_parallel.py::test_parallel_run_then_resume_through_the_cli_without_a_server",
              "tests/pytest_plugin/test_parallel.py::test_each_arms_tests_run_in_one_worker_of_their_own",
              "tests/pytest_plugin/test_run_handover.py::test_by_hand_each_process_reads_run_json_at_most_once",
              "tests/judge/test_drift_floor_run_level.py::test_the_run_level_tests_power_on_planted_shifts",
              "tests/test_cli.py::test_plan_of_shipped_arm_passes_preflight")


def pytest_collection_modifyitems(config, items):
    rank = {nodeid: i for i, nodeid in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(SLOW_FIRST)))  # stable: the rest keep their order


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (make test's end-to-end session): whole groups of tests per worker (tests/xdist_groups.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist_groups import GroupScheduling

    return GroupScheduling(config, log)
