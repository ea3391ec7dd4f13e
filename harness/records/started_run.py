"""StartedRun: a run as admission loaded it and run.json recorded it at its start, one frozen value handed to the
suites (harness/qualify/suites.py passes it to pytest as a plugin object; an xdist worker gets it from its controller).
Nothing here reads a file: a YAML file or run.json edited mid-run changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from harness.config.arms import Arm
from harness.config.armset import ArmSet
from harness.config.errors import ConfigError
from harness.config.thresholds import Gates
from harness.config.variants import apply_variant
from harness.records.manifest import CalibrationRepeat, RunManifest
from harness.records.started import recorded_workload


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: pytest registers it as a plugin
class StartedRun:
    run_dir: Path
    manifest: RunManifest  # run.json as written at the start (a resumed run: with this resume noted)
    arms: Mapping[str, Arm]  # every arm of the run and the candidates' eager variants, --set applied; secrets kept
    arm_set: ArmSet  # the candidate/reference pairs
    parallel: bool = False  # one xdist worker per arm (harness.pytest_plugin.parallel)
    resume: bool = False  # run only the tests without an outcome in the run directory's results file
    refresh_reference: bool = False  # capture reference outputs anew even when the store has them

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def arm(self, name: str) -> Arm:
        """The arm as admission loaded it (launched from this one: run.json's dump has its secrets redacted)."""
        if name not in self.arms:
            raise ConfigError(f"arm {name!r} is no arm of this run (its arms: {', '.join(self.arms)})")
        return self.arms[name]

    def served_arm(self, name: str) -> Arm:
        """The arm as its server is launched: a calibration repeat's candidates under the repeat's variant
        (harness/config/variants.py), every other arm as admission loaded it. Keys, prompts and limits read arm()."""
        arm = self.arm(name)
        repeat = self.manifest.calibration
        if repeat is None or not repeat.variant or name not in self.arm_set.candidates:
            return arm
        return apply_variant(arm, repeat.variant)

    def workload(self, family: str, candidate: str) -> BaseModel:
        """The `family` workload (harness.config.workloads.FAMILIES) of `candidate`, as run.json recorded it at the
        run's start (a resumed run: at its first start); its reference is measured with the same."""
        return recorded_workload(self.manifest, candidate, family, self.run_dir / "run.json")

    def thresholds(self, candidate: str) -> Gates:
        """The thresholds `candidate` and its reference are judged with, as run.json recorded them at the start
        (resolved for a strict run then): the suites, the report and a re-render agree."""
        recorded = next((p.gates for p in self.manifest.pairs if p.candidate == candidate and p.gates), None)
        if recorded is None:
            raise ConfigError(f"{self.run_dir / 'run.json'}: no thresholds recorded for candidate {candidate!r}; "
                              "start a new run")
        return Gates.model_validate(recorded)

    @property
    def order_seed(self) -> int:
        """The reference checks' batch composition and arrival order (refcheck/prompts/order.py); 0: canonical."""
        return self.manifest.order_seed or 0

    @property
    def length_seed(self) -> int:
        """The seed of the long_context sweep's jittered lengths (refcheck/prompts/long_context.py sweep_lengths);
        0 where run.json has none (runs before the sweep)."""
        return self.manifest.length_seed or 0

    @property
    def calibration_repeat(self) -> CalibrationRepeat | None:
        """Set when this run is a repeat of `harness calibrate` (judged by the current calibration of its key)."""
        return self.manifest.calibration

    def build_of(self, arm: str) -> str | None:
        """The build hash of `arm`'s vLLM as run.json recorded it at the start (harness/plan/build.py); None: not
        recorded."""
        build = (self.manifest.builds or {}).get(arm)
        return build.build_hash if build else None
