"""How `make test`'s one pytest-xdist session splits and orders its tests. End-to-end tests (modules
tests/e2e/test_e2e_*.py, the only ones marked e2e) that must share a worker are one group, by node id: they share a
session fixture that lives in one worker (the one cpu-ref server, the reference-check tests' store) or a module's
fixtures (the SLURM cluster, a module's stored references). Inside a group, its members run in the order listed here
(a store's filler first). The full CPU-pair run is no such fixture: both workers read the one run
(tests/e2e/conftest.py), so its users are groups of their own, and only its first user is named here, to be scheduled
first. Every other test is a group of its own. The e2e groups go first, longest first, and the unit tests after them
fill whichever worker frees up first, so the two workers end together.

xdist's own `--dist loadgroup` cannot do it under pytest 9: it marks a group by appending `@group` to `item._nodeid`,
which pytest 9's `Node.nodeid` no longer reads (it reads `_id`), so every test became a group of its own and two
workers each ran the full-pair qualification (seen in a CI run). The controller sees node ids only, so the groups are
written down here; tests/e2e/conftest.py checks at collection that every test using a shared session fixture is in
that fixture's group, so a new one cannot silently split it.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path

from xdist.scheduler.loadscope import LoadScopeScheduling

# Node ids (or module paths, for every test of the module) per shared session fixture, in the order they run.
SHARED = {
    # the stopping tests after the others (tests/e2e/conftest.py), among them this order: the kill first
    "cpu_ref_server": ("tests/e2e/test_e2e_engine_death.py", "tests/e2e/test_e2e_gsm8k.py",
                       "tests/e2e/test_e2e_teacher_forcing.py", "tests/e2e/test_e2e_request_faults.py",
                       "tests/e2e/test_e2e_cpu.py::test_capture_computes_from_scratch_even_with_prefix_caching_on",
                       "tests/e2e/test_e2e_cpu.py::test_the_shared_server_serves_stable_greedy_logprobs_of_a_peaked_model"),
    "reference_store": ("tests/e2e/test_e2e_reference_checks.py", "tests/e2e/test_e2e_degeneration.py"),
}
# Groups by name only: the test that starts the session's full-pair run (its other users wait for it on any worker).
NAMED = {"full_pair_run": ("tests/e2e/test_e2e_cpu.py::test_qualify_cpu_pair_end_to_end",)}
E2E_MODULE = "tests/e2e/test_e2e_"  # the e2e modules' path prefix (tests/conftest.py checks it against the marker)

# The e2e groups, longest first (measured: docs/setup-and-tests.md): the controller hands them out in collection order
# (--no-loadscope-reorder keeps it); a group runs whole on one worker. The full-pair run's first: its other users come
# after long groups that need nothing of it (a worker reaching one of them earlier waits for the run). A group named in
# neither list (a new module) comes between them, then the short TAIL groups, then the unit tests.
GROUP_ORDER = ["full_pair_run", "tests/e2e/test_e2e_slurm.py", "reference_store", "tests/e2e/test_e2e_faults.py",
               "tests/e2e/test_e2e_spec_decode.py", "tests/e2e/test_e2e_length_fault.py",
               "tests/e2e/test_e2e_capacity.py", "cpu_ref_server", "tests/e2e/test_e2e_resume.py",
               "tests/e2e/test_e2e_parallel.py", "tests/e2e/test_e2e_coverage_faults.py"]
TAIL = ["tests/e2e/test_e2e_cpu.py", "tests/e2e/test_e2e_history.py", "tests/e2e/test_e2e_ruler.py"]
# The unit tests of 7.5 s or more in CI (two clean-clone runs, 2026-12-07), longest first: first among the unit tests,
# so that the short ones end the session and its two workers end together. Order only: every test runs either way.
UNIT_SLOW_FIRST = (
    "tests/pytest_plugin/test_parallel.py::test_two_candidates_and_their_shared_reference_each_run_in_one_worker",
    "tests/tinymodel/test_determinism.py::test_two_generations_give_the_same_weights_hash",
    "tests/pytest_plugin/test_started_run.py::test_by_hand_a_run_is_admitted_and_recorded_and_a_changed_arm_refuses_its_"
    "resume",
    "tests/tinymodel/test_determinism.py::test_the_circuit_control_is_the_trained_model_without_needles_or_circuit",
    "tests/probes/test_probes_in_server_env.py::test_the_vllm_importing_probes_answer_from_vllm_itself",
    "tests/pytest_plugin/test_parallel.py::test_parallel_run_then_resume_through_the_cli_without_a_server",
    "tests/tinymodel/test_circuit.py::test_mla_circuit_copies_needles_leaves_ordinary_text_and_fails_off_by_one",
    "tests/opcheck/test_runner_cpu.py::test_runner_on_cpu_ranks",
    "tests/test_bad_input.py::test_the_launch_detector_sees_a_real_launch",
    "tests/history/test_nightly_check.py::test_planted_slowdown_fails_from_its_third_night_naming_the_run_it_entered",
    "tests/history/test_nightly_check.py::test_the_same_nights_without_the_slowdown_pass_every_night_they_can_judge",
    "tests/nightly/test_pipeline.py::test_each_steps_command_dry_runs[dcp8_dspark-dcp8]",
    "tests/measure/test_ruler.py::test_samples_are_lm_evals_own_and_the_same_every_time",
    "tests/measure/test_ruler.py::test_a_draw_that_trips_lm_evals_vt_bug_is_drawn_again_from_the_next_seed",
    "tests/tinymodel/test_circuit.py::test_previous_token_head_off_by_one_breaks_retrieval",
    "tests/opcheck/test_coverage_faults.py::test_stale_entries_are_served_only_while_their_block_is_free[0]",
    "tests/opcheck/test_coverage_faults.py::test_stale_entries_are_served_only_while_their_block_is_free[1]",
    "tests/tinymodel/test_circuit.py::test_circuit_copies_needles_and_leaves_ordinary_text_alone",
    "tests/opcheck/test_length_faults.py::test_the_server_interpreter_imports_the_patched_copy_and_says_so",
    "tests/opcheck/test_length_faults.py::test_logit_jitter_is_reproducible_per_seed_new_per_seed_and_scales_on_top",
    "tests/opcheck/test_length_faults.py::test_near_tie_then_loop_flips_a_near_tie_and_then_loops_in_the_server_"
    "interpreter",
    "tests/judge/test_drift_floor_run_level.py::test_the_run_level_tests_power_on_planted_shifts")


def group_rank(group: str) -> int:
    """The e2e group's place in the session: GROUP_ORDER's, then any other group, then TAIL's."""
    if group in GROUP_ORDER:
        return GROUP_ORDER.index(group)
    return len(GROUP_ORDER) + 1 + TAIL.index(group) if group in TAIL else len(GROUP_ORDER)


def order_key(nodeid: str, stops_shared_server: bool) -> tuple[int, int, bool, int]:
    """A test's place in the session (a stable sort keeps a module's own order within equal keys): the e2e groups in
    their order, a group's members in theirs, a test that stops the shared server after its other users; then the
    unit tests, the slow ones first."""
    if is_e2e(nodeid):
        return 0, group_rank(group_of(nodeid)), stops_shared_server, member_rank(nodeid)
    slow = UNIT_SLOW_FIRST.index(nodeid) if nodeid in UNIT_SLOW_FIRST else len(UNIT_SLOW_FIRST)
    return 1, slow, False, 0


def is_e2e(nodeid: str) -> bool:
    return nodeid.startswith(E2E_MODULE)


def astray(marked: list[tuple[str, bool]]) -> list[str]:
    """Node ids whose e2e marker (node id, marked) disagrees with their module's name: the scheduler knows an e2e
    test by its node id alone."""
    return [nodeid for nodeid, e2e in marked if is_e2e(nodeid) != e2e]


def missing_kind(nodeids: list[str]) -> str | None:
    """The kind of test (unit, e2e) that a whole-suite session lacks, if any."""
    kinds = {is_e2e(n) for n in nodeids}
    return None if not nodeids or kinds == {True, False} else ("unit" if True in kinds else "e2e")


def scope_of(nodeid: str) -> str:
    """What the scheduler hands out whole: an e2e test's group; any other test alone (a unit test shares nothing
    across tests that another worker could not make for itself)."""
    return group_of(nodeid) if is_e2e(nodeid) else nodeid


def member_rank(nodeid: str) -> int:
    """The position of the test's entry in its group's list (0 for a group of one module)."""
    module = nodeid.split("::", 1)[0]
    members = SHARED.get(group_of(nodeid), ())
    return next((i for i, m in enumerate(members) if m in (nodeid, module)), 0)


def group_of(nodeid: str) -> str:
    """The shared fixture's name for its users; else the test's module (a module's fixtures stay on one worker)."""
    module = nodeid.split("::", 1)[0]
    for group, members in (SHARED | NAMED).items():
        if nodeid in members or module in members:
            return group
    return module


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the scope = scope_of(node id): whole e2e groups to a worker, in collection order
    (tests/conftest.py puts the longest first, the unit tests last)."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def once_per_session(directory: Path, produce: Callable[[], dict]) -> dict:
    """produce()'s JSON result, made once for every process that asks in `directory` (the session's, which both
    workers see): the first caller makes it under a lock and stores it, later callers wait for the lock and read it.
    A caller whose produce() raised stores nothing, and the next one makes it again."""
    directory.mkdir(parents=True, exist_ok=True)
    result = directory / "result.json"
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when produce() raised
        if not result.is_file():
            result.write_text(json.dumps(produce()))
    return json.loads(result.read_text())
