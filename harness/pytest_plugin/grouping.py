"""Grouping by arm: xdist schedules each arm's tests of a parallel run as one work unit (so one worker, whose session
owns the arm's only server); each session learns which tests each arm runs per suite and whose stored outputs a
test needs; a serial run orders its tests so each arm's server starts once (order_by_arm)."""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

from harness.pytest_plugin.references import PROMPT_SET_FIXTURES
from harness.pytest_plugin.session import SESSION_KEY, HarnessSession

REFERENCE_FIRST = tuple(PROMPT_SET_FIXTURES)  # reference_outputs, eager_outputs, long_context_outputs


class ArmScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with one scope per arm (HarnessSession.arm_of): every test of an arm goes to the same
    worker, and the arms' units to different workers while there are workers to spare.

    Not `--dist loadgroup`: its group is a '@<group>' suffix that xdist 3.8 writes to `item._nodeid`, which pytest 9.2
    no longer reads (node ids are `item._id`), so every test became a unit of its own and an arm's tests were spread
    over both workers, each starting the arm's server and reading the other's lines in the shared server.log."""

    def __init__(self, config: pytest.Config, log, session: HarnessSession):
        super().__init__(config, log)
        self.session = session

    def _split_scope(self, nodeid: str) -> str:
        return self.session.arm_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """The controller of a parallel run schedules by arm (xdist's own choice from --dist otherwise)."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.run.parallel:
        return None
    return ArmScheduling(config, log, session)


def needs_outputs(item: pytest.Item) -> bool:
    return any(f in getattr(item, "fixturenames", ()) for f in REFERENCE_FIRST)


def prompt_sets(item: pytest.Item) -> set[str]:
    """The prompt sets whose stored reference outputs a test needs."""
    return {PROMPT_SET_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in PROMPT_SET_FIXTURES}


def order_by_arm(keys: list[tuple[str, int]], run_order: list[str]) -> list[int]:
    """The order tests run in (pure): indices of `keys` -- (arm, phase) per test -- sorted by the arm's place in the
    run (every reference before its candidates: its records and outputs exist when they are compared) and then by
    phase (`phase`). Stable: a suite's tests keep the command line's file order."""
    rank = {arm: i for i, arm in enumerate(run_order)}
    return sorted(range(len(keys)), key=lambda i: (rank.get(keys[i][0], len(rank)), keys[i][1]))


def phase(item: pytest.Item, parallel: bool = False) -> int:
    """Serial: a test that needs stored outputs first (0: a capture stops every other server, so it comes before the
    arm's own server starts), then the arm's served tests (1), then the rest (2). Parallel: the served tests first
    (0: the arm's server loads while the reference's worker captures), then the tests that wait for that capture.
    Either way a test on the candidate's KV-capped twin (`kv_capped`) comes last (3): the twin stops the candidate."""
    served = "served_arm" in getattr(item, "fixturenames", ())
    if "kv_capped" in getattr(item, "fixturenames", ()):  # last: its twin stops the candidate's server
        return 3
    if parallel:
        return 0 if served else 1 if needs_outputs(item) else 2
    return 0 if needs_outputs(item) else 1 if served else 2


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The session learns which tests each arm runs per suite (what a comparison of a parallel run waits for) and
    whose stored outputs a collected test needs (that arm captures them while its own server is up)."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    for item in items:
        if item.path.parent.name != "suites":
            continue
        arm = session.arm_of(item.nodeid)
        session.collected.setdefault(item.nodeid.split("::")[0], {}).setdefault(arm, []).append(item.nodeid)
        if needs_outputs(item):
            ref = session.run.arm_set.reference_of(arm)
            if ref:
                session.outputs_needed.setdefault(ref, set()).update(prompt_sets(item))
        if "eager_outputs" in getattr(item, "fixturenames", ()):
            session.eager_needed.add(arm)
