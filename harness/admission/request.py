"""What `qualify` was asked and what admission made of it, as frozen values: the command line ends at the CLI's
boundary (harness/cli.py cmd_qualify). Every later step takes a value and returns one (harness/qualify/pipeline.py);
none reads or writes an argparse Namespace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.admission.arms import RunArms
from harness.records.manifest import BaselineBuild, RunManifest


@dataclass(frozen=True)
class QualifyRequest:
    arm: str | None = None  # one candidate (--arm), or several (--arms a,b), or neither with --resume
    arms: str | None = None
    reference: str | None = None  # replaces the one candidate's `reference:`
    run_id: str | None = None
    run_dir: str | None = None
    suites: str | None = None  # comma-separated; None: the default suites (a resumed run: its own)
    parallel: bool = False
    resume: str | None = None  # the run id or directory continued
    refresh_reference: bool = False
    baseline: str | None = None
    baseline_build: str | None = None  # --baseline-build [RUN]: "last" or a run (harness/admission/baseline_build.py)
    keep_outputs: bool = False  # --keep-outputs: the candidate's outputs stored, so a passed run signs its build off
    order_seed: int = 0
    length_seed: int | None = None  # None: a fresh seed for a new run
    calibration_repeat: str | None = None  # ID:K/N, written by `calibrate`
    overrides: tuple[str, ...] = ()  # --set
    vllm_check: bool = True
    strict: bool = False  # --strict; CI=true makes a run strict as well (admission.verdicts.strict_run)
    pytest_args: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()  # the command line as typed, for run.json (redacted there)


@dataclass(frozen=True)
class AdmittedRun:
    """A run every check has admitted: where it goes, its arms, its suites, and the request it came from."""
    request: QualifyRequest
    run_dir: Path
    arms: RunArms
    suites: tuple[str, ...]
    strict: bool
    resumed: RunManifest | None = None  # the resumed run's run.json, as admission read it
    baseline_build: BaselineBuild | None = None  # --baseline-build: the signed-off run its outputs are compared with

    @property
    def baseline(self) -> str | None:
        """The run the metric gates are diffed against: --baseline, else the baseline build's signed-off run."""
        if self.request.baseline:
            return self.request.baseline
        return self.baseline_build.run_dir if self.baseline_build else None
