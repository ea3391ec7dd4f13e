"""Parallel runs' grouping by arm: xdist schedules each arm's tests as one work unit (so one worker, whose session owns
the arm's only server), and each worker's session learns which tests each arm runs per suite."""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

from harness.config.errors import HarnessError
from harness.pytest_plugin.parallel import test_id
from harness.pytest_plugin.session import SESSION_KEY, HarnessSession

REFERENCE_FIRST = ("reference_outputs", "eager_outputs")


def arm_of(nodeid: str, arms: tuple[str, ...], candidate: str) -> str:
    """The arm a suite test belongs to, from its node id alone (all the xdist controller sees): the `served_arm` id in
    brackets, which is the arm's name (pytest_generate_tests), else the candidate (comparisons, checks, op suite)."""
    name = test_id(nodeid).rpartition("::")[2]
    params = name.partition("[")[2].removesuffix("]")
    return params if params in arms else candidate


def run_arms(session: HarnessSession) -> tuple[str, ...]:
    """The candidate and its reference (the candidate alone when its YAML is broken: its tests report that)."""
    try:
        ref = session.reference_name
    except HarnessError:
        ref = None
    return (session.candidate_name, ref) if ref and ref != session.candidate_name else (session.candidate_name,)


class ArmScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with one scope per arm: every test of an arm goes to the same worker, and the arms'
    units to different workers while there are workers to spare.

    Not `--dist loadgroup`: its group is a '@<group>' suffix that xdist 3.8 writes to `item._nodeid`, which pytest 9.2
    no longer reads (node ids are `item._id`), so every test became a unit of its own and an arm's tests were spread
    over both workers, each starting the arm's server and reading the other's lines in the shared server.log."""

    def __init__(self, config: pytest.Config, log, arms: tuple[str, ...], candidate: str):
        super().__init__(config, log)
        self.arms, self.candidate = arms, candidate

    def _split_scope(self, nodeid: str) -> str:
        return arm_of(nodeid, self.arms, self.candidate)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """The controller of a parallel run schedules by arm (xdist's own choice from --dist otherwise)."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.options.parallel:
        return None
    return ArmScheduling(config, log, run_arms(session), session.candidate_name)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parallel runs: the session learns which tests each arm runs per suite (what a comparison waits for), and whether
    any test needs stored reference outputs."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.options.parallel:
        return
    arms = run_arms(session)
    for item in items:
        if item.path.parent.name != "suites":
            continue
        arm = arm_of(item.nodeid, arms, session.candidate_name)
        session.collected.setdefault(item.nodeid.split("::")[0], {}).setdefault(arm, []).append(item.nodeid)
        if any(f in getattr(item, "fixturenames", ()) for f in REFERENCE_FIRST):
            session.needs_reference_outputs = True
