"""pytest plugin: options, one server per arm per session, and the results record fixture.

The root conftest.py only names this module. The session object is built from a
plain Options value and kept in config.stash; suites receive servers through
fixtures and write typed records through `record`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.config.arms import Arm, load_arm
from harness.config.errors import ConfigError, HarnessError
from harness.config.paths import REPORTS_DIR, run_id_now, server_python
from harness.config.workloads import ReferenceChecksWorkload, load_workload, workload_for
from harness.measure.generation import Sampling
from harness.measure.prompts import token_space
from harness.plan.redact import redact_argv, redact_env
from harness.records.results import ResultsWriter, read_results
from harness.records.schema import OutcomeRecord, Record, ServerRecord
from harness.refcheck import store as store
from harness.refcheck.batches import capture
from harness.refcheck.prompts import CheckPrompts, build_check_prompts
from harness.refcheck.store import (
    StoredOutputs,
    installed_vllm_version,
    make_key,
    model_difference,
    model_identity,
    reference_dir,
)
from harness.serve.launch import LiveServer, launch

DEFAULT_ARM = "cpu-smoke"


@dataclass
class Options:
    arm: str = DEFAULT_ARM
    reference: str | None = None  # default: the arm's own `reference:`
    run_dir: Path | None = None
    overrides: list[str] = field(default_factory=list)  # --set, applied to the candidate arm
    refresh_reference: bool = False  # capture reference outputs anew even when the store has them


class HarnessSession:
    def __init__(self, options: Options):
        self.options = options
        self.run_dir = options.run_dir or REPORTS_DIR / run_id_now()
        self.run_id = self.run_dir.name
        self.writer = ResultsWriter(self.run_dir / "results.jsonl")
        self._arms: dict[str, Arm] = {}
        self._servers: dict[str, LiveServer] = {}
        self._failures: dict[str, str] = {}
        self._stored: dict[str, StoredOutputs] = {}

    def arm(self, name: str) -> Arm:
        if name not in self._arms:
            overrides = self.options.overrides if name == self.options.arm else []
            self._arms[name] = load_arm(name, overrides)
        return self._arms[name]

    @property
    def candidate_name(self) -> str:
        return self.options.arm

    @property
    def reference_name(self) -> str | None:
        return self.options.reference or self.arm(self.options.arm).reference

    def server(self, name: str) -> LiveServer:
        """Launch on first use and cache until released; a failed launch is recorded once and re-raised for every
        later user (its tests fail with the reason, the other arm still runs)."""
        if name in self._failures:
            raise HarnessError(self._failures[name])
        if name not in self._servers:
            arm = self.arm(name)
            try:
                live = launch(arm, self.run_dir / name)
            except HarnessError as exc:
                self._failures[name] = str(exc)
                self.writer.append(ServerRecord(run_id=self.run_id, arm=name, suite="server", status="failed",
                                                reason=str(exc), expected_backend=arm.attention.expected,
                                                log_path=str(self.run_dir / name / "server.log")))
                raise
            node = live.plan.nodes[0]
            self.writer.append(ServerRecord(
                run_id=self.run_id, arm=name, suite="server", status="up", base_url=live.info.base_url,
                startup_s=round(live.info.startup_s, 2), vllm_version=live.info.vllm_version,
                backends=live.info.backends, expected_backend=arm.attention.expected,
                argv=redact_argv(node.argv), env=redact_env(node.env), log_path=str(live.server.log_path)))
            self._servers[name] = live
        return self._servers[name]

    def pair(self) -> tuple[str, str]:
        """(candidate, reference) for a comparison test; skips when the candidate names no reference."""
        ref = self.reference_name
        if ref is None:
            pytest.skip(f"arm {self.candidate_name!r} names no reference arm")
        return self.candidate_name, ref

    def records(self) -> list[Record]:
        """Every record of this run so far, read back from results.jsonl: what the gates are computed from."""
        return read_results(self.writer.path)[0]

    def check_prompts(self) -> tuple[ReferenceChecksWorkload, CheckPrompts, Sampling]:
        """The candidate's reference-check workload (both arms get the same prompts)."""
        cand = self.arm(self.candidate_name)
        w = load_workload(workload_for(cand, "reference_checks"), kind=ReferenceChecksWorkload)
        return w, build_check_prompts(w, token_space(cand, w)), Sampling(w.output_tokens, w.top_logprobs)

    def stored_outputs(self, name: str) -> StoredOutputs:
        """Arm `name`'s outputs for the check prompts: from the store when the key matches, else captured now.

        Capturing stops every other server first: on one GPU two servers would not both fit."""
        if name in self._stored:
            return self._stored[name]
        cand, arm = self.arm(self.candidate_name), self.arm(name)
        identity = model_identity(arm)
        difference = model_difference(cand, model_identity(cand), arm, identity)
        if difference:
            raise ConfigError(difference)
        _, prompts, sampling = self.check_prompts()
        key = make_key(arm, identity, prompts, sampling, installed_vllm_version(arm.launcher.python or server_python()))
        stored = None if self.options.refresh_reference else store.load(key, name, prompts, reference_dir())
        if stored is None:
            for other in list(self._servers):
                if other != name:
                    self.release(other)
            outputs = capture(self.server(name), prompts.all(), sampling)
            self.release(name)
            path = store.save(key, name, prompts, outputs, reference_dir())
            stored = StoredOutputs(name, key.digest, path, outputs, reused=False)
        self._stored[name] = stored
        return stored

    def release(self, name: str) -> None:
        live = self._servers.pop(name, None)
        if live is not None:
            live.server.stop()

    def close(self) -> None:
        for live in self._servers.values():
            live.server.stop()
        self._servers.clear()


SESSION_KEY = pytest.StashKey[HarnessSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "DCP qualification harness")
    group.addoption("--arm", default=DEFAULT_ARM, help="candidate arm (configs/arms/<name>.yaml)")
    group.addoption("--reference", default=None, help="reference arm (default: the arm's `reference:`)")
    group.addoption("--run-dir", default=None, type=Path, help="run directory (default reports/<timestamp>)")
    group.addoption("--set", dest="harness_set", action="append", default=[], metavar="PATH=VALUE",
                    help="override a field of the candidate arm, e.g. --set parallelism.dcp=4")
    group.addoption("--refresh-reference", action="store_true", default=False,
                    help="capture the reference arm's outputs anew instead of reusing the reference store")


def options_from(config: pytest.Config) -> Options:
    return Options(arm=config.getoption("--arm"), reference=config.getoption("--reference"),
                   run_dir=config.getoption("--run-dir"), overrides=list(config.getoption("harness_set")),
                   refresh_reference=config.getoption("--refresh-reference"))


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SESSION_KEY] = HarnessSession(options_from(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()


@pytest.fixture(scope="session")
def harness_session(request: pytest.FixtureRequest) -> HarnessSession:
    return request.config.stash[SESSION_KEY]


def _live(session: HarnessSession, name: str) -> LiveServer:
    try:
        return session.server(name)
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)


# Function-scoped on purpose: they return the session's cached server, launching it again if
# `served_arm` released it after that arm's tests.
@pytest.fixture
def candidate(harness_session: HarnessSession) -> LiveServer:
    return _live(harness_session, harness_session.candidate_name)


@pytest.fixture
def reference(harness_session: HarnessSession) -> LiveServer:
    name = harness_session.reference_name
    if name is None:
        pytest.skip(f"arm {harness_session.candidate_name!r} names no reference arm")
    return _live(harness_session, name)


def _stored(session: HarnessSession, name: str | None) -> StoredOutputs:
    if name is None:
        pytest.skip(f"arm {session.candidate_name!r} names no reference arm")
    try:
        return session.stored_outputs(name)
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)


# Session-scoped and requested before `candidate`: captured (when not stored) before the candidate starts. The
# eager variant is captured here too, so no later test has to stop the candidate to capture it.
@pytest.fixture(scope="session")
def reference_outputs(harness_session: HarnessSession) -> StoredOutputs:
    stored = _stored(harness_session, harness_session.reference_name)
    variant = harness_session.arm(harness_session.candidate_name).eager_variant
    if variant:
        _stored(harness_session, variant)
    return stored


@pytest.fixture(scope="session")
def eager_outputs(harness_session: HarnessSession) -> StoredOutputs | None:
    """The candidate under --enforce-eager (its `eager_variant` arm), where the arm names one."""
    variant = harness_session.arm(harness_session.candidate_name).eager_variant
    return _stored(harness_session, variant) if variant else None


REFERENCE_FIRST = ("reference_outputs", "eager_outputs")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that need stored outputs run first, so a capture never has to stop a candidate mid-suite."""
    first = [i for i in items if any(f in getattr(i, "fixturenames", ()) for f in REFERENCE_FIRST)]
    if first:
        items[:] = first + [i for i in items if i not in first]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`served_arm` runs a test once per arm of the run (candidate, then reference), ids = arm names."""
    if "served_arm" not in metafunc.fixturenames:
        return
    session: HarnessSession = metafunc.config.stash[SESSION_KEY]
    names = [session.candidate_name]
    try:
        if session.reference_name and session.reference_name != session.candidate_name:
            names.append(session.reference_name)
    except HarnessError:
        pass  # the candidate's own YAML is broken: its test reports that
    metafunc.parametrize("served_arm", names, ids=names, indirect=True, scope="session")


@pytest.fixture(scope="session")
def served_arm(request: pytest.FixtureRequest, harness_session: HarnessSession):
    # pytest runs every test of one arm, then finalizes this before the next arm's: the two servers never
    # compete for the machine, and each is stopped as soon as its tests are done.
    yield _live(harness_session, request.param)
    harness_session.release(request.param)


@pytest.fixture
def record(harness_session: HarnessSession, request: pytest.FixtureRequest):
    """`record(RecordType, arm=..., **fields)` appends a typed record to the run's results file."""
    suite = request.node.module.__name__.removeprefix("test_")

    def _record(record_type, *, arm: str, **fields):
        rec = record_type(run_id=harness_session.run_id, arm=arm, suite=suite, **fields)
        harness_session.writer.append(rec)
        return rec

    return _record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        session: HarnessSession | None = item.config.stash.get(SESSION_KEY, None)
        if session is not None and item.path.parent.name == "suites":
            arm = getattr(item, "callspec", None)
            arm_name = arm.params.get("served_arm", session.candidate_name) if arm else session.candidate_name
            outcome = report.outcome if report.when == "call" else ("skipped" if report.skipped else "error")
            message = "" if report.passed else str(report.longreprtext)[-4000:]
            session.writer.append(OutcomeRecord(
                run_id=session.run_id, arm=arm_name, suite=item.module.__name__.removeprefix("test_"),
                test=item.nodeid, outcome=outcome, message=message, duration_s=round(report.duration, 3)))
    return report
