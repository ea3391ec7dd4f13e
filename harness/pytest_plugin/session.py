"""HarnessSession: what a suite sees of the run -- its arms as the run started with them (StartedRun), the candidate a
test runs for (its focus) with its reference, workloads and thresholds, the results file and `records()`. The servers'
lifecycle is ArmServers', the stored reference outputs ReferenceOutputs'. Built from an Options value and kept in
config.stash."""

from __future__ import annotations

import pytest

from harness.config.arms import Arm
from harness.config.paths import REPORTS_DIR, run_id_now
from harness.config.thresholds import Gates
from harness.pytest_plugin.options import Options
from harness.pytest_plugin.parallel import arm_of, wait_until
from harness.pytest_plugin.references import CHECKS, ReferenceOutputs
from harness.pytest_plugin.servers import ArmServers
from harness.pytest_plugin.started_run import StartedRun
from harness.records.attempts import current_records, done_tests, next_attempt
from harness.records.results import ResultsWriter, read_results
from harness.records.schema import Record


class HarnessSession:
    def __init__(self, options: Options):
        self.options = options
        self.run_dir = options.run_dir or REPORTS_DIR / run_id_now()
        self.run_id = self.run_dir.name
        results = self.run_dir / "results.jsonl"
        earlier = read_results(results)[0] if options.resume else []
        self.done = done_tests(earlier)  # resumed: tests that already have a verdict
        self.writer = ResultsWriter(results, next_attempt(earlier) if options.resume else 0)
        self.run = StartedRun(options, self.run_dir)
        self.servers = ArmServers(self.run_dir, self.writer, self.run.arm, options.parallel)
        self.references = ReferenceOutputs(self.run, self.servers, options.refresh_reference)
        self._focus: str | None = None  # the candidate the running test is for (focus_on)
        # module path -> arm -> test ids of the run's served-arm tests (parallel: what a comparison waits for)
        self.collected: dict[str, dict[str, list[str]]] = {}
        # arm -> the prompt sets (references.CHECKS, LONG_CONTEXT) whose stored outputs a collected test needs
        self.outputs_needed: dict[str, set[str]] = {}
        # candidates with a collected test that compares with their eager variant (graph_replay's eager_outputs)
        self.eager_needed: set[str] = set()

    def arm(self, name: str) -> Arm:
        return self.run.arm(name)

    def workload(self, family: str, candidate: str | None = None):
        """The `family` workload of the candidate in focus (or of `candidate`), as the run started with it."""
        return self.run.workload(family, candidate or self.candidate_name)

    def thresholds(self) -> Gates:
        """The thresholds of the candidate in focus as the run recorded them: the one rule for every suite."""
        return self.run.thresholds(self.candidate_name)

    def arm_of(self, nodeid: str) -> str:
        """The arm a test belongs to (parallel.arm_of: its node id's arm, else the first candidate)."""
        return arm_of(nodeid, tuple(self.run.arm_set.arms), self.run.arm_set.candidates[0])

    def focus_on(self, nodeid: str) -> None:
        """Before each test: the candidate it runs for -- its own, or for a reference's test the first candidate it
        is the reference of (whose workloads and thresholds it is measured with)."""
        self._focus = self.run.arm_set.owner(self.arm_of(nodeid))

    def candidates_for(self, arm: str) -> list[str]:
        """The candidates an arm's own measurements serve: itself where it is a candidate, and every candidate it
        is the reference of."""
        arm_set = self.run.arm_set
        return ([arm] if arm in arm_set.candidates else []) + [p.candidate for p in arm_set.pairs if p.reference == arm]

    @property
    def candidate_name(self) -> str:
        return self._focus or self.run.arm_set.candidates[0]

    @property
    def reference_name(self) -> str | None:
        if self.options.reference and self.candidate_name == self.options.named[0]:
            return self.options.reference
        return self.arm(self.candidate_name).reference

    def pair(self) -> tuple[str, str]:
        """(candidate, reference) for a comparison test; skips when the candidate names no reference."""
        ref = self.reference_name
        if ref is None:
            pytest.skip(f"arm {self.candidate_name!r} names no reference arm")
        return self.candidate_name, ref

    def records(self) -> list[Record]:
        """Every current record of this run so far, read back from results.jsonl: what the gates are computed from
        (a test run again in a resumed attempt counts once, with its latest records)."""
        return current_records(read_results(self.writer.path)[0])

    def wait_for_tests(self, tests: list[str]) -> bool:
        """Parallel: until each test has an outcome in results.jsonl (False if its worker finished without one)."""
        return wait_until(lambda: set(tests) <= done_tests(read_results(self.writer.path)[0]), self.run_dir)

    def wait_until_stored(self, name: str, which: str = CHECKS) -> bool:
        """Parallel: until arm `name`'s outputs for prompt set `which` are in the reference store (another worker
        captures them)."""
        def stored() -> bool:
            return self.references.outputs(name, self.candidate_name, capture_missing=False, which=which) is not None

        return wait_until(stored, self.run_dir)


SESSION_KEY = pytest.StashKey[HarnessSession]()
