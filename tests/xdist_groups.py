"""Which end-to-end tests must share one pytest-xdist worker, by node id: they share a session fixture that lives in
one worker (the one cpu-ref server, the reference-check tests' store) or a module's fixtures (the SLURM cluster, a
module's stored references). Inside a group, its members run in the order listed here (a store's filler first). The
full CPU-pair run is no such fixture: both workers read the one run (tests/e2e/conftest.py), so its users are groups
of their own, and only its first user is named here, to be scheduled first.

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
    """xdist's scope scheduling with the scope = group_of(node id): whole groups to a worker, in collection order
    (tests/e2e/conftest.py puts the longest first)."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


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
