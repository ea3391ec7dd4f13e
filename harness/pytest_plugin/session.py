"""HarnessSession: what a suite sees of the run -- its arms as the run started with them (StartedRun), the results file
and `records()` -- and UnderTest, the candidate one test runs for (with its reference, workloads, thresholds, prompts
and reference checks), handed to the test by the `under_test` fixture: no cursor moves between tests. The servers'
lifecycle is ArmServers', the stored reference outputs ReferenceOutputs'. Built from the run's StartedRun value
(harness/pytest_plugin/started_run.py session_run) and kept in config.stash."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.config.arms import Arm
from harness.config.thresholds import Gates
from harness.pytest_plugin.parallel import arm_of, test_id, wait_until
from harness.pytest_plugin.references import ReferenceOutputs
from harness.pytest_plugin.servers import ArmServers
from harness.records.attempts import current_records, done_tests, next_attempt
from harness.records.results import ResultsWriter, read_results
from harness.records.schema import Record
from harness.records.started_run import StartedRun
from harness.refcheck.judging.check import ReferenceCheck, reference_check
from harness.refcheck.prompt_sets.check_set import CHECKS
from harness.refcheck.prompt_sets.registry import prompt_set
from harness.refcheck.store.reference_store import arm_config_sha, noise_digest


class HarnessSession:
    def __init__(self, run: StartedRun):
        self.run = run
        self.run_dir, self.run_id = run.run_dir, run.run_id
        results = self.run_dir / "results.jsonl"
        earlier = read_results(results)[0] if run.resume else []
        self.done = done_tests(earlier)  # resumed: tests that already have a verdict
        self.writer = ResultsWriter(results, next_attempt(earlier) if run.resume else 0)
        self.servers = ArmServers(self.run_dir, self.writer, run.served_arm, run.parallel)  # a repeat's variant
        self.references = ReferenceOutputs(run, self.servers, run.refresh_reference)
        # module path -> arm -> test ids of the run's served-arm tests (parallel: what a comparison waits for)
        self.collected: dict[str, dict[str, list[str]]] = {}
        # arm -> the prompt sets (refcheck/prompt_sets/registry.py names) whose stored outputs a collected test needs
        self.outputs_needed: dict[str, set[str]] = {}
        # candidates with a collected test that compares with their eager variant (graph_replay's eager_outputs)
        self.eager_needed: set[str] = set()

    def arm(self, name: str) -> Arm:
        return self.run.arm(name)

    def workload(self, family: str, candidate: str):
        """The `family` workload of `candidate`, as the run started with it."""
        return self.run.workload(family, candidate)

    def arm_of(self, nodeid: str) -> str:
        """The arm a test belongs to (parallel.arm_of: its node id's arm, else the first candidate)."""
        return arm_of(nodeid, tuple(self.run.arm_set.arms), self.run.arm_set.candidates[0])

    def under_test(self, nodeid: str) -> UnderTest:
        """What the test with this node id runs for (the `under_test` fixture): the arm it belongs to (arm_of, the
        one rule with the scheduler and the outcome record) and that arm's candidate."""
        return self.for_arm(self.arm_of(nodeid))

    def for_arm(self, arm: str) -> UnderTest:
        """An arm's tests run for the arm itself where it is a candidate, else for the first candidate it is the
        reference of (whose workloads and thresholds it is measured with)."""
        candidate = self.run.arm_set.owner(arm)
        return UnderTest(arm, candidate, self.run.arm_set.reference_of(candidate), self)

    def reference_of(self, arm: str) -> str | None:
        """The reference of `arm` where it is a candidate of the run; None for a reference or a candidate without."""
        return self.run.arm_set.reference_of(arm)

    @property
    def candidates(self) -> list[str]:
        return self.run.arm_set.candidates

    @property
    def order_seed(self) -> int:
        """The reference checks' batch composition and arrival order (refcheck/prompts/order.py); 0: canonical."""
        return self.run.order_seed

    @property
    def length_seed(self) -> int:
        """The long_context sweep's length seed, as run.json recorded it."""
        return self.run.length_seed

    def candidates_for(self, arm: str) -> list[str]:
        """The candidates an arm's own measurements serve: itself where it is a candidate, and every candidate it
        is the reference of."""
        arm_set = self.run.arm_set
        return ([arm] if arm in arm_set.candidates else []) + [p.candidate for p in arm_set.pairs if p.reference == arm]

    def records(self) -> list[Record]:
        """Every current record of this run so far, read back from results.jsonl: what the gates are computed from
        (a test run again in a resumed attempt counts once, with its latest records)."""
        return current_records(read_results(self.writer.path)[0])

    def wait_for_tests(self, tests: list[str]) -> bool:
        """Parallel: until each test has an outcome in results.jsonl (False if its worker finished without one)."""
        return wait_until(lambda: set(tests) <= done_tests(read_results(self.writer.path)[0]), self.run_dir)

    def wait_for_reference(self, nodeid: str, reference: str | None) -> None:
        """Parallel: a comparison (no server of its own) waits for the reference's tests of its suite to be
        recorded -- only those, not the whole reference arm. Serial: the reference ran first; nothing to wait for."""
        needed = [test_id(t) for t in self.collected.get(nodeid.split("::")[0], {}).get(reference or "", [])]
        if self.run.parallel and needed:
            self.wait_for_tests(needed)

    def wait_until_stored(self, name: str, candidate: str, which: str = CHECKS) -> bool:
        """Parallel: until arm `name`'s outputs for `candidate`'s prompt set `which` are in the reference store
        (another worker captures them)."""
        def stored() -> bool:
            return self.references.outputs(name, candidate, capture_missing=False, which=which) is not None

        return wait_until(stored, self.run_dir)


@dataclass(frozen=True)
class UnderTest:
    """The candidate a suite test runs for, handed to it by the `under_test` fixture: `arm`, the arm the test belongs
    to (a `served_arm` test's arm, which may be a reference; else the candidate), `candidate`, whose workloads and
    thresholds it runs with, and `reference`, the candidate's (None: it names none). What a suite reads of its
    candidate it reads here."""

    arm: str
    candidate: str
    reference: str | None
    session: HarnessSession = field(repr=False, compare=False)

    def pair(self) -> tuple[str, str]:
        """(candidate, reference) for a comparison test; skips when the candidate names no reference."""
        if self.reference is None:
            pytest.skip(f"arm {self.candidate!r} names no reference arm")
        return self.candidate, self.reference

    def workload(self, family: str):
        """The candidate's `family` workload, as the run started with it (its reference is measured with the same)."""
        return self.session.workload(family, self.candidate)

    def thresholds(self) -> Gates:
        """The candidate's thresholds as the run recorded them: the one rule for every suite."""
        return self.session.run.thresholds(self.candidate)

    def prompt_set(self, name: str):
        """(workload, prompts, sampling) of the candidate's prompt set `name` (refcheck/prompt_sets/registry.py), as
        the run started with them: what its reference's stored outputs were captured from."""
        prompts, sampling = self.session.references.prompt_set(name, self.candidate)
        return self.workload(prompt_set(name).family), prompts, sampling

    def check_prompts(self):
        """prompt_set(CHECKS): kept while suites/test_build_outputs.py (in progress beside this change) calls it."""
        return self.prompt_set(CHECKS)

    def reference_check(self, check: str, noise_key: str) -> ReferenceCheck:
        """`check` of the candidate against reference outputs of this noise key (StoredOutputs.noise_key, or
        run_outputs_key's), judged by the candidate's recorded thresholds, this run's calibration repeat and build."""
        run = self.session.run
        return reference_check(self.thresholds(), self.session.arm(self.candidate), check, noise_key,
                               run.calibration_repeat, run.build_of(self.candidate))

    def run_outputs_key(self, outputs: str) -> tuple[str, str]:
        """(reference key, noise key) of a check against the reference's outputs of this run (`outputs` says which):
        the reference's config, the prompts and the model stand in for a store key (no vLLM version: a new build is
        judged by the last trusted calibration)."""
        _, ref = self.pair()
        key = f"{outputs}, reference config {arm_config_sha(self.session.arm(ref))}"
        return key, noise_digest({"reference": key, "model": self.session.references.identity(ref)})


SESSION_KEY = pytest.StashKey[HarnessSession]()
