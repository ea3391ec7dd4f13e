"""Fixtures and collection hooks: the session in config.stash, servers per arm (candidate, reference, or each arm
in turn through `served_arm`), and the stored reference outputs, captured before any candidate starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from harness.config.errors import HarnessError
from harness.config.kv_twin import twin_name
from harness.pytest_plugin.grouping import order_by_arm, phase
from harness.pytest_plugin.parallel import mark_worker_done, test_id
from harness.pytest_plugin.recording import outcome_record
from harness.pytest_plugin.references import EAGER_OUTPUTS
from harness.pytest_plugin.session import SESSION_KEY, HarnessSession, UnderTest
from harness.pytest_plugin.started_run import session_run
from harness.refcheck.prompt_sets.check_set import CHECKS
from harness.refcheck.prompt_sets.registry import PromptSet, prompt_sets
from harness.refcheck.store.reference_store import StoredOutputs
from harness.serve.launch import LiveServer


def pytest_configure(config: pytest.Config) -> None:
    """The session of the run this process runs (started_run.session_run); none where it runs no suite files."""
    run = session_run(config)
    if run is not None:
        config.stash[SESSION_KEY] = HarnessSession(run)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A server still cached at the end (the candidate's, the reference's) that died after its last test fails the
    run: recorded as failed, and the exit status set to 1 where every test passed."""
    harness = session.config.stash.get(SESSION_KEY, None)
    deaths = harness.servers.deaths() if harness is not None else []
    if harness is not None and harness.run.parallel:
        mark_worker_done(harness.run_dir)  # a worker waiting on this one's records stops waiting
    for message in deaths:
        session.config.get_terminal_writer().line(f"FAILED: {message}", red=True)
    if deaths and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.servers.close()


@pytest.fixture(scope="session")
def harness_session(request: pytest.FixtureRequest) -> HarnessSession:
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.fail("no harness run in this pytest session: run the suites with `python -m harness qualify`, or name "
                    "suite files (suites/test_<suite>.py) to pytest", pytrace=False)
    return session


def _live(session: HarnessSession, name: str) -> LiveServer:
    failure = None
    try:
        return session.servers.server(name)
    except HarnessError as exc:
        failure = str(exc)
    pytest.fail(failure, pytrace=False)  # outside the except block: the message alone, no chained traceback


@pytest.fixture
def under_test(harness_session: HarnessSession, request: pytest.FixtureRequest) -> UnderTest:
    """The candidate this test runs for, resolved from the test itself (its node id: HarnessSession.under_test)."""
    return harness_session.under_test(request.node.nodeid)


# Function-scoped on purpose: they return the session's cached server, launching it again if
# `served_arm` released it after that arm's tests.
@pytest.fixture
def candidate(harness_session: HarnessSession, under_test: UnderTest) -> LiveServer:
    return _live(harness_session, under_test.candidate)


@pytest.fixture
def kv_capped(harness_session: HarnessSession, under_test: UnderTest) -> LiveServer:
    """The server output_coverage's KV families run on: the candidate's KV-capped twin where admission derived one
    (harness/config/kv_twin.py), the candidate's own server stepping aside for it (its GPUs); else the candidate. Its
    tests run last in the candidate's turn (grouping.phase), so the candidate is not started again after it."""
    twin = twin_name(under_test.candidate)
    if twin not in harness_session.run.arms:
        return _live(harness_session, under_test.candidate)
    failure = None
    try:
        harness_session.servers.release(under_test.candidate)
    except HarnessError as exc:  # found dead after its last use: its tests are done, the run fails at its end
        failure = str(exc)
    if failure:
        pytest.fail(failure, pytrace=False)
    return _live(harness_session, twin)


@pytest.fixture
def reference(harness_session: HarnessSession, under_test: UnderTest) -> LiveServer:
    if under_test.reference is None:
        pytest.skip(f"arm {under_test.candidate!r} names no reference arm")
    return _live(harness_session, under_test.reference)


def _stored(session: HarnessSession, test: UnderTest, name: str | None, serving: bool = False,
            which: str = CHECKS) -> StoredOutputs:
    """Arm `name`'s stored outputs for the prompt set `which` of `test`'s candidate. `serving`: this worker runs that
    arm's tests (a parallel run's reference worker), so it captures them itself, without waiting, and keeps the
    server it captured with for those tests."""
    if name is None:
        pytest.skip(f"arm {test.candidate!r} names no reference arm")
    try:
        if not serving and session.run.parallel and which in session.outputs_needed.get(name, ()):
            # the reference's own worker captures them while its server is up; wait for the store, and capture
            # here only if that worker finished without them
            session.wait_until_stored(name, test.candidate, which)
        return session.references.outputs(name, test.candidate, keep_server=serving, which=which)
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)


# Requested before `candidate`, and their tests run first in the candidate's turn (grouping.order_by_arm): captured
# (when not stored) before the candidate starts. The eager variant is captured here too, so no later test has to stop
# the candidate to capture it. Function-scoped: each candidate of the run has its own reference (the session keeps
# what it loaded or captured). One fixture per registered prompt set (refcheck/prompt_sets/registry.py), named by it.
def outputs_fixture(ps: PromptSet):
    def outputs(harness_session: HarnessSession, under_test: UnderTest) -> StoredOutputs:
        if under_test.reference is None:
            pytest.skip(f"arm {under_test.candidate!r} names no reference arm")
        try:
            prompts, _ = harness_session.references.prompt_set(ps.name, under_test.candidate)
        except HarnessError as exc:
            pytest.fail(str(exc), pytrace=False)
        if not prompts.all():  # nothing to compare (a workload without a sweep): no server starts for it
            return StoredOutputs(under_test.reference, "", Path(), {}, reused=True)
        stored = _stored(harness_session, under_test, under_test.reference, which=ps.name)
        capture_eager_variant(harness_session, under_test)
        return stored

    outputs.__doc__ = f"The reference arm's outputs for the candidate's prompt set {ps.name!r}."
    return pytest.fixture(name=ps.fixture)(outputs)


for _ps in prompt_sets().values():
    globals()[_ps.fixture] = outputs_fixture(_ps)


def capture_eager_variant(session: HarnessSession, test: UnderTest) -> None:
    """The candidate's eager variant's outputs, with the reference's: whichever of these fixtures comes first (the
    long_context grid's, on the 120k arms) captures them before the candidate starts, so graph_replay never stops the
    candidate to capture them (on one H200 that cost a second start, 43 s). Only where a collected test compares with
    the variant: a run without graph_replay starts no eager server."""
    variant = session.arm(test.candidate).eager_variant
    if variant and test.candidate in session.eager_needed:
        _stored(session, test, variant)


@pytest.fixture(name=EAGER_OUTPUTS)
def eager_outputs(harness_session: HarnessSession, under_test: UnderTest) -> StoredOutputs | None:
    """The candidate under --enforce-eager (its `eager_variant` arm), where the arm names one."""
    variant = harness_session.arm(under_test.candidate).eager_variant
    return _stored(harness_session, under_test, variant) if variant else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A resumed run drops the tests that already have a verdict (so no server starts for an arm with no work
    left); the rest run arm by arm, references first (grouping.order_by_arm), so each server starts once and a capture
    never has to stop a candidate mid-suite. A suite module's `skip_reason(session, under_test, served)` (a
    sentence, or None, for what a test runs for: under_test.arm and its candidate; `served`: the arm's own run, else
    a candidate's comparison) skips that test before any fixture starts a server."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    if session.run.resume:
        done = [i for i in items if test_id(i.nodeid) in session.done]
        if done:
            config.hook.pytest_deselected(items=done)
            items[:] = [i for i in items if test_id(i.nodeid) not in session.done]
    suite_items = [i for i in items if i.path.parent.name == "suites"]
    if suite_items:
        keys = [(session.arm_of(i.nodeid), phase(i, session.run.parallel)) for i in suite_items]
        order = order_by_arm(keys, session.run.arm_set.run_order())
        others = [i for i in items if i.path.parent.name != "suites"]
        items[:] = [suite_items[k] for k in order] + others
    reasons: dict = {}
    for item in items:
        module = getattr(item, "module", None)
        check = getattr(module, "skip_reason", None)
        if not callable(check):
            continue
        key = (module, session.arm_of(item.nodeid), "served_arm" in getattr(item, "fixturenames", ()))
        if key not in reasons:
            try:
                reasons[key] = check(session, session.for_arm(key[1]), key[2])
            except HarnessError:
                reasons[key] = None  # the candidate's YAML is broken: its tests report that
        if reasons[key]:
            item.add_marker(pytest.mark.skip(reason=reasons[key]))


CANDIDATE_PARAM = "_for_candidate"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`served_arm` runs a test once per arm of the run (candidates, then references), ids = arm names. In a run of
    several candidates every other suite test runs once per candidate, ids = candidate names."""
    session = metafunc.config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    if "served_arm" in metafunc.fixturenames:
        names = session.run.arm_set.arms
        metafunc.parametrize("served_arm", names, ids=names, indirect=True, scope="session")
    elif len(session.run.arm_set.candidates) > 1 and metafunc.definition.path.parent.name == "suites":
        names = session.run.arm_set.candidates
        metafunc.parametrize(CANDIDATE_PARAM, names, ids=names, indirect=True)


@pytest.fixture(autouse=True)
def _for_candidate(request: pytest.FixtureRequest) -> str | None:
    """The candidate a suite test of a several-candidate run is for (its id); None otherwise."""
    return getattr(request, "param", None)


@pytest.fixture(scope="session")
def served_arm(request: pytest.FixtureRequest, harness_session: HarnessSession):
    # pytest runs every test of one arm, then finalizes this before the next arm's: the servers never compete for
    # the machine, and each is stopped as soon as its tests are done. A reference's stored outputs are captured
    # here, before its tests; in a parallel run each arm has its own worker, and the candidates' wait for them.
    session = harness_session
    for which in sorted(session.outputs_needed.get(request.param, ())):
        # captured while this server is up (and, in parallel, by the worker that serves this arm: waiting would
        # deadlock)
        _stored(session, session.for_arm(request.param), request.param, serving=True, which=which)
    yield _live(harness_session, request.param)
    failure = None
    try:
        harness_session.servers.release(request.param)
    except HarnessError as exc:  # found dead after its tests passed: an error at teardown fails the run
        failure = str(exc)
    if failure:
        pytest.fail(failure, pytrace=False)




SERVER_FIXTURES = ("served_arm", "candidate", "reference")


@pytest.fixture(autouse=True)
def _server_still_alive(request: pytest.FixtureRequest):
    """Before each suite test: the servers it uses are still alive. After a server death the arm's remaining tests
    read 'not run: server of arm X died (exit -9) during <suite>', not a connection error."""
    session: HarnessSession | None = request.config.stash.get(SESSION_KEY, None)
    if session is None or request.node.path.parent.name != "suites":
        return
    suite = request.node.module.__name__.removeprefix("test_")
    names = request.fixturenames
    spec = getattr(request.node, "callspec", None)
    test = session.under_test(request.node.nodeid)
    arms = []
    if "served_arm" in names and spec is not None:
        arms.append(spec.params["served_arm"])
    if "candidate" in names or "kv_capped" in names:
        arms.append(test.candidate)
    if "reference" in names and test.reference:
        arms.append(test.reference)
    if not arms and "served_arm" not in names:  # a comparison: in parallel, its reference's tests first
        session.wait_for_reference(request.node.nodeid, test.reference)
    for arm in dict.fromkeys(arms):
        failure = None
        try:
            session.servers.using(arm, suite)
        except HarnessError as exc:
            failure = str(exc)
        if failure:  # raised outside the except block: the message alone, no chained traceback
            pytest.fail(failure, pytrace=False)


@pytest.fixture
def record(harness_session: HarnessSession, request: pytest.FixtureRequest):
    """`record(RecordType, arm=..., **fields)` appends a typed record to the run's results file; `of=` a fields model
    (e.g. the ReferenceCheckFields refcheck builds) gives the record its fields."""
    suite = request.node.module.__name__.removeprefix("test_")

    def _record(record_type, *, arm: str, of: BaseModel | None = None, **fields):
        given = {**(of.model_dump() if of is not None else {}), **fields}
        rec = record_type(run_id=harness_session.run_id, arm=arm, suite=suite, test=test_id(request.node.nodeid),
                          **given)
        harness_session.writer.append(rec)
        return rec

    return _record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Every suite test's outcome (and a failed or skipped setup, a failed teardown) becomes an OutcomeRecord; a
    HarnessError fails it with its message alone."""
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(HarnessError) and item.path.parent.name == "suites":
        # a HarnessError says what is wrong and what to do: its message alone, not a traceback through the harness
        report.longrepr = f"{call.excinfo.typename}: {call.excinfo.value}"
    if report.when == "call" or (report.when == "setup" and not report.passed) or \
            (report.when == "teardown" and report.failed):
        session: HarnessSession | None = item.config.stash.get(SESSION_KEY, None)
        if session is not None and item.path.parent.name == "suites":
            session.writer.append(outcome_record(item, report, session.run_id, session.arm_of(item.nodeid)))
    return report
