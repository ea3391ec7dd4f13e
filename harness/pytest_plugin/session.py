"""The run's session: its arms, one live server per arm (launched on first use, released when done), and the
results file every record goes to. Built from an Options value and kept in config.stash."""

from __future__ import annotations

import logging

import pytest

from harness.config.arms import Arm, load_arm, overrides_for
from harness.config.armset import ArmSet, Pair, expand_arm_set
from harness.config.errors import ConfigError, HarnessError
from harness.config.paths import REPORTS_DIR, run_id_now
from harness.config.workloads import load_workload, workload_for, workload_kind
from harness.plan.redact import redact_arm_dump
from harness.pytest_plugin.options import Options
from harness.pytest_plugin.parallel import arm_of, leased, wait_until
from harness.pytest_plugin.recording import server_failed, server_up
from harness.pytest_plugin.references import CHECKS, ReferenceOutputs
from harness.records.attempts import current_records, done_tests, next_attempt
from harness.records.manifest import CalibrationRepeat, ManifestMissing, ManifestProblem, RunManifest, read_manifest
from harness.records.results import ResultsWriter, read_results
from harness.records.schema import Record
from harness.records.started import arm_change, recorded_arm_set, recorded_workload
from harness.serve.launch import LiveServer, launch

log = logging.getLogger(__name__)


class HarnessSession:
    def __init__(self, options: Options):
        self.options = options
        self.run_dir = options.run_dir or REPORTS_DIR / run_id_now()
        self.run_id = self.run_dir.name
        results = self.run_dir / "results.jsonl"
        earlier = read_results(results)[0] if options.resume else []
        self.done = done_tests(earlier)  # resumed: tests that already have a verdict
        self.writer = ResultsWriter(results, next_attempt(earlier) if options.resume else 0)
        self._arms: dict[str, Arm] = {}
        self._arm_set: ArmSet | None = None
        self._focus: str | None = None  # the candidate the running test is for (focus_on)
        self._servers: dict[str, LiveServer] = {}
        self._failures: dict[str, str] = {}
        self._using: dict[str, str] = {}  # arm -> the suite that last used its server
        self._leases: dict = {}  # arm -> its server's GPU lease (parallel runs)
        self._set_aside: list[str] = []  # deaths found when a serial run stopped a server to start another
        # module path -> arm -> test ids of the run's served-arm tests (parallel: what a comparison waits for)
        self.collected: dict[str, dict[str, list[str]]] = {}
        # arm -> the prompt sets (references.CHECKS, LONG_CONTEXT) whose stored outputs a collected test needs
        self.outputs_needed: dict[str, set[str]] = {}
        # candidates with a collected test that compares with their eager variant (graph_replay's eager_outputs)
        self.eager_needed: set[str] = set()
        self.references = ReferenceOutputs(self)
        self._started: tuple[RunManifest | None, str | None] | None = None  # run.json, or why it is unreadable

    def started(self) -> RunManifest | None:
        """run.json, what the run started with (read once); None where there is none (pytest run by hand). One that
        cannot be read is a ConfigError: the run's workloads and arms are then unknown."""
        if self._started is None:
            try:
                self._started = (read_manifest(self.run_dir), None)
            except ManifestMissing:
                self._started = (None, None)
            except ManifestProblem as exc:
                self._started = (None, str(exc))
        manifest, problem = self._started
        if problem:
            raise ConfigError(f"{problem}: what this run started with is not known; restore it, or start a new run")
        return manifest

    @property
    def order_seed(self) -> int:
        """The reference checks' batch composition and arrival order (harness/refcheck/order.py); 0: canonical."""
        started = self.started()
        return (started.order_seed or 0) if started else 0

    @property
    def length_seed(self) -> int:
        """The seed of the long_context sweep's jittered lengths (harness/refcheck/long_context.py sweep_lengths),
        recorded in run.json when the run started; 0 where it was not (runs before the sweep)."""
        started = self.started()
        return (started.length_seed or 0) if started else 0

    @property
    def calibration_repeat(self) -> CalibrationRepeat | None:
        """Set when this run is a repeat of `harness calibrate` (judged by gates.yaml, no floor)."""
        started = self.started()
        return started.calibration if started else None

    @property
    def arm_set(self) -> ArmSet:
        """The run's candidate/reference pairs (harness.config.armset): run.json's, where they are the run these options
        name; else from the named arms' `reference:` fields, where a broken YAML makes that arm a candidate without a
        reference (its own tests report the error)."""
        if self._arm_set is None:
            try:
                started = self.started()
            except ConfigError:
                started = None  # each test that needs run.json reports it
            self._arm_set = started and recorded_arm_set(started, self.options.named, self.options.reference)
        if self._arm_set is None:
            named, refs = self.options.named, {}
            for name in named:
                try:
                    refs[name] = load_arm(name, overrides_for(name, self.options.overrides, True)).reference
                except HarnessError:
                    refs[name] = None
            try:
                self._arm_set = expand_arm_set(named, refs, self.options.reference)
            except HarnessError:  # a reference cycle, refused before any run by admission
                self._arm_set = ArmSet(tuple(Pair(n, None) for n in named))
        return self._arm_set

    @property
    def candidates(self) -> list[str]:
        return self.arm_set.candidates

    @property
    def run_arms(self) -> list[str]:
        """Every arm with tests of its own, each once: candidates, then references that are no candidate."""
        return self.arm_set.arms

    def arm(self, name: str) -> Arm:
        """The arm as its YAML reads now, refused (ConfigError) where it is not the arm run.json recorded at the start:
        a run must not change midway. Launched from the YAML: the recorded dump has its secrets redacted."""
        if name not in self._arms:
            arm = load_arm(name, overrides_for(name, self.options.overrides, name in self.candidates))
            started = self.started()
            recorded = ((started.arms if started else None) or {}).get(name)
            change = recorded is not None and arm_change(arm, recorded, redact_arm_dump(arm.model_dump(mode="json")))
            if change:
                raise ConfigError(change)
            self._arms[name] = arm
        return self._arms[name]

    def workload(self, family: str, candidate: str | None = None):
        """The `family` workload (harness.config.workloads.FAMILIES) of the candidate in focus, or of `candidate`;
        its reference is measured with the same. The one run.json recorded at the run's start (a resumed run: at its
        first start); the YAML only where there is no run.json (pytest run by hand)."""
        name = candidate or self.candidate_name
        started = self.started()
        if started is None:
            return load_workload(workload_for(self.arm(name), family), kind=workload_kind(family))
        return recorded_workload(started, name, family, self.run_dir / "run.json")

    def arm_of(self, nodeid: str) -> str:
        """The arm a test belongs to (parallel.arm_of: its node id's arm, else the first candidate)."""
        return arm_of(nodeid, tuple(self.run_arms), self.candidates[0])

    def focus_on(self, nodeid: str) -> None:
        """Before each test: the candidate it runs for -- its own, or for a reference's test the first candidate it
        is the reference of (whose workloads and thresholds it is measured with)."""
        self._focus = self.arm_set.owner(self.arm_of(nodeid))

    def candidates_for(self, arm: str) -> list[str]:
        """The candidates an arm's own measurements serve: itself where it is a candidate, and every candidate it
        is the reference of."""
        mine = [arm] if arm in self.candidates else []
        return mine + [p.candidate for p in self.arm_set.pairs if p.reference == arm]

    @property
    def candidate_name(self) -> str:
        return self._focus or self.candidates[0]

    @property
    def reference_name(self) -> str | None:
        if self.options.reference and self.candidate_name == self.options.named[0]:
            return self.options.reference
        return self.arm(self.candidate_name).reference

    def server(self, name: str) -> LiveServer:
        """Launch on first use and cache until released; a failed launch is recorded once and re-raised for every
        later user (its tests fail with the reason, the other arm still runs)."""
        if name in self._failures:
            raise HarnessError(self._failures[name])
        self.check_alive(name)
        if name not in self._servers:
            arm = self.arm(name)
            if not self.options.parallel:  # serial: one server at a time, the machine's whole
                for other in [o for o in self._servers if o != name]:
                    self.set_aside(other)
            try:
                if self.options.parallel:  # a disjoint GPU set for this server, held until it stops
                    arm, self._leases[name] = leased(arm)
                live = launch(arm, self.run_dir / name)
            except HarnessError as exc:
                self._unlease(name)
                self._failures[name] = str(exc)
                self.writer.append(server_failed(self.run_id, arm, str(exc), self.run_dir / name / "server.log"))
                raise
            self.writer.append(server_up(self.run_id, live))
            self._servers[name] = live
        return self._servers[name]

    def using(self, name: str, suite: str) -> None:
        """A suite test is about to use arm `name`'s server: checked alive first, then remembered as its user."""
        if name in self._failures:
            raise HarnessError(self._failures[name])
        self.check_alive(name)
        self._using[name] = suite

    def check_alive(self, name: str) -> None:
        """A cached server that died makes the arm's remaining tests 'not run', with the cause, recorded once."""
        live = self._servers.get(name)
        death = live.server.death() if live is not None else None
        if death is None:
            return
        during = self._using.get(name, "start-up")
        reason = f"not run: server of arm {name!r} died ({death}) during {during}"
        log.warning("arm %s: server died (%s) during %s; its remaining tests are not run", name, death, during)
        self._failures[name] = reason
        self._retire(name, f"died ({death}) during {during}")
        raise HarnessError(reason)

    def _unlease(self, name: str) -> None:
        lease = self._leases.pop(name, None)
        if lease is not None:
            lease.release()

    def wait_for_tests(self, tests: list[str]) -> bool:
        """Parallel: until each test has an outcome in results.jsonl (False if its worker finished without one)."""
        return wait_until(lambda: set(tests) <= done_tests(read_results(self.writer.path)[0]), self.run_dir)

    def wait_until_stored(self, name: str, which: str = CHECKS) -> bool:
        """Parallel: until arm `name`'s outputs for prompt set `which` are in the reference store (another worker
        captures them)."""
        return wait_until(lambda: self.references.outputs(name, capture_missing=False, which=which) is not None,
                          self.run_dir)

    def _retire(self, name: str, reason: str) -> None:
        live = self._servers.pop(name)
        live.server.stop()
        self._unlease(name)
        self.writer.append(server_failed(self.run_id, live.arm, reason, live.server.log_path))

    def found_dead(self, name: str) -> str | None:
        """A server that died after its last use (between tests, or once its tests were done) is recorded as
        failed and stopped; returns the message that fails the run, None while it lives."""
        live = self._servers.get(name)
        death = live.server.death() if live is not None else None
        if death is None:
            return None
        last = self._using.get(name, "start-up")
        reason = f"died ({death}) after its last use, by {last}"
        log.warning("arm %s: server %s", name, reason)
        self._retire(name, reason)
        return f"server of arm {name!r} {reason}: an unexpected server exit fails the run. Log {live.server.log_path}"

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

    def release_all_but(self, name: str) -> None:
        """Stop every live server but arm `name`'s (one server at a time on a shared device)."""
        for other in [o for o in self._servers if o != name]:
            self.release(other)

    def release(self, name: str) -> None:
        """Stop arm `name`'s server once its tests are done; HarnessError if it was found dead first."""
        dead = self.found_dead(name)
        live = self._servers.pop(name, None)
        if live is not None:
            live.server.stop()
        self._unlease(name)
        if dead:
            raise HarnessError(dead)

    def set_aside(self, name: str) -> None:
        """Stop arm `name`'s server for another's (serial runs); a death found now fails the run at its end."""
        try:
            self.release(name)
        except HarnessError as exc:
            self._set_aside.append(str(exc))

    def deaths(self) -> list[str]:
        """At the end of the run: every cached server found dead (recorded), before close() stops the rest, and those
        found dead when set aside."""
        return [*self._set_aside, *(d for d in map(self.found_dead, list(self._servers)) if d)]

    def close(self) -> None:
        for name, live in self._servers.items():
            live.server.stop()
            self._unlease(name)
        self._servers.clear()


SESSION_KEY = pytest.StashKey[HarnessSession]()
