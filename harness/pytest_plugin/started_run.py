"""StartedRun: the run as it started, for the suites -- run.json read once, its candidate/reference pairs, each arm
loaded and refused where it is not the arm recorded, each candidate's workloads and thresholds as recorded. A YAML
file edited mid-run changes nothing; without a run.json (pytest run by hand) the YAML is read instead."""

from __future__ import annotations

from pathlib import Path

from harness.admission.verdicts import strict_run
from harness.config.arms import Arm, load_arm, overrides_for
from harness.config.armset import ArmSet, Pair, expand_arm_set
from harness.config.errors import ConfigError, HarnessError
from harness.config.thresholds import Gates, for_run, load_gates
from harness.config.workloads import load_workload, workload_for, workload_kind
from harness.plan.redact import redact_arm_dump
from harness.pytest_plugin.options import Options
from harness.records.manifest import CalibrationRepeat, ManifestMissing, ManifestProblem, RunManifest, read_manifest
from harness.records.started import arm_change, recorded_arm_set, recorded_workload


class StartedRun:
    def __init__(self, options: Options, run_dir: Path):
        self.options, self.run_dir = options, run_dir
        self._arms: dict[str, Arm] = {}
        self._arm_set: ArmSet | None = None
        self._started: tuple[RunManifest | None, str | None] | None = None  # run.json, or why it is unreadable

    def manifest(self) -> RunManifest | None:
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
        started = self.manifest()
        return (started.order_seed or 0) if started else 0

    @property
    def length_seed(self) -> int:
        """The seed of the long_context sweep's jittered lengths (harness/refcheck/long_context.py sweep_lengths),
        recorded in run.json when the run started; 0 where it was not (runs before the sweep)."""
        started = self.manifest()
        return (started.length_seed or 0) if started else 0

    @property
    def calibration_repeat(self) -> CalibrationRepeat | None:
        """Set when this run is a repeat of `harness calibrate` (judged by the current calibration of its key)."""
        started = self.manifest()
        return started.calibration if started else None

    def build_of(self, arm: str) -> str | None:
        """The build hash of `arm`'s vLLM as run.json recorded it at the start (harness/plan/build.py); None: not
        recorded."""
        started = self.manifest()
        build = (started.builds or {}).get(arm) if started else None
        return build.build_hash if build else None

    @property
    def arm_set(self) -> ArmSet:
        """The run's candidate/reference pairs (harness.config.armset): run.json's, where they are the run these options
        name; else from the named arms' `reference:` fields, where a broken YAML makes that arm a candidate without a
        reference (its own tests report the error)."""
        if self._arm_set is None:
            try:
                started = self.manifest()
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

    def arm(self, name: str) -> Arm:
        """The arm as its YAML reads now, refused (ConfigError) where it is not the arm run.json recorded at the start:
        a run must not change midway. Launched from the YAML: the recorded dump has its secrets redacted."""
        if name not in self._arms:
            arm = load_arm(name, overrides_for(name, self.options.overrides, name in self.arm_set.candidates))
            started = self.manifest()
            recorded = ((started.arms if started else None) or {}).get(name)
            change = recorded is not None and arm_change(arm, recorded, redact_arm_dump(arm.model_dump(mode="json")))
            if change:
                raise ConfigError(change)
            self._arms[name] = arm
        return self._arms[name]

    def workload(self, family: str, candidate: str):
        """The `family` workload (harness.config.workloads.FAMILIES) of `candidate`; its reference is measured with
        the same. The one run.json recorded at the run's start (a resumed run: at its first start)."""
        started = self.manifest()
        if started is None:
            return load_workload(workload_for(self.arm(candidate), family), kind=workload_kind(family))
        return recorded_workload(started, candidate, family, self.run_dir / "run.json")

    def thresholds(self, candidate: str) -> Gates:
        """The thresholds `candidate` and its reference are judged with: the ones run.json recorded at the start
        (resolved for a strict run then), so the suites, the report and a re-render agree; gates.yaml edited mid-run
        changes nothing. Without a run.json (pytest run by hand): the arm's gates.yaml sections, resolved now."""
        started = self.manifest()
        recorded = next((p.gates for p in (started.pairs if started else []) if p.candidate == candidate and p.gates),
                        None)
        return Gates.model_validate(recorded) if recorded else for_run(load_gates(candidate), strict_run())
