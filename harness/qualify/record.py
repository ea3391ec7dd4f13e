"""The record-the-run step: run.json at a run's start, or one more `resumed` entry in a resumed run's."""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from harness.admission.arms import RunArms
from harness.admission.verdicts import strict_run
from harness.config.arms import Arm
from harness.config.armset import ArmSet, Pair
from harness.config.errors import ConfigError
from harness.config.suites import default_suites, per_arm_suites
from harness.config.thresholds import for_run, load_gates
from harness.plan.redact import redact_argv, redact_arm_dump
from harness.records.manifest import CalibrationRepeat, Resume, RunPair, load_manifest, write_manifest
from harness.records.runinfo import now, start_manifest, workload_dumps


def record_run_start(run_dir: Path, arms: list[Arm], argv: list[str], suites: list[str] | None = None,
                     arm_set: ArmSet | None = None, strict: bool = False, order_seed: int = 0,
                     calibration: CalibrationRepeat | None = None, length_seed: int | None = None) -> None:
    """run.json at the start: harness version, commit, host, argv, suites, the first candidate's workloads and gate
    thresholds, the pairs (each candidate with its reference, gate thresholds and workloads: the report recomputes the
    gates and finds missing levels with these) and the arms (candidates first), secrets redacted. Without `arm_set`
    the first arm is the candidate of the second."""
    suites = suites if suites is not None else default_suites()
    manifest = start_manifest(run_dir.name, {a.name: redact_arm_dump(a.model_dump(mode="json")) for a in arms},
                              redact_argv(argv), suites, workload_dumps(arms[0]) if arms else {})
    manifest.per_arm_suites = per_arm_suites(suites)
    manifest.order_seed = order_seed
    if length_seed is not None:
        manifest.length_seed = length_seed
    if calibration is not None:
        manifest.calibration = calibration
    if arm_set is None and arms:
        arm_set = ArmSet((Pair(arms[0].name, arms[1].name if len(arms) > 1 else None),))
    if arm_set is not None:
        manifest.strict = strict  # the gates below are resolved for it (thresholds.for_run)
        manifest.gates = for_run(load_gates(arm_set.candidates[0]), strict).model_dump(mode="json")
        by_name = {a.name: a for a in arms}
        manifest.pairs = [RunPair(candidate=p.candidate, reference=p.reference,
                                  gates=for_run(load_gates(p.candidate), strict).model_dump(mode="json"),
                                  workloads=workload_dumps(by_name[p.candidate]) if p.candidate in by_name else None)
                          for p in arm_set.pairs]
    write_manifest(run_dir, manifest)


def note_resume(run_dir: Path, argv: list[str]) -> None:
    """run.json keeps its first start; each resume adds when and how (the end time and exit code are the last)."""
    manifest, problems = load_manifest(run_dir)
    if manifest is None:  # admission read it a moment ago; a file gone since is this run's to report
        raise ConfigError(f"--resume: {problems[0]}")
    resume = Resume(started=now(), argv=redact_argv(argv), exit_code_before=manifest.exit_code)
    write_manifest(run_dir, manifest.model_copy(update={"resumed": [*(manifest.resumed or []), resume]}))


def record_run(run_dir: Path, arms: RunArms, args: argparse.Namespace) -> None:
    """A new run's run.json, or one more `resumed` entry in the resumed run's."""
    if args.resume:
        note_resume(run_dir, sys.argv)
    else:
        record_run_start(run_dir, arms.run_arms, sys.argv, args.suite_list, arms.arm_set, strict_run(args.strict),
                         args.order_seed, calibration_repeat(args.calibration_repeat),
                         args.length_seed if args.length_seed is not None else fresh_length_seed())


def fresh_length_seed() -> int:
    """A new run's own seed for the long_context sweep's jittered lengths: every run checks other lengths."""
    return secrets.randbelow(2**31 - 1) + 1


def calibration_repeat(text: str | None) -> CalibrationRepeat | None:
    """--calibration-repeat ID:K/N (written by `harness calibrate`) as the manifest's field."""
    if not text:
        return None
    ident, _, count = text.rpartition(":")
    repeat, _, of = count.partition("/")
    if not (ident and repeat.isdigit() and of.isdigit() and 1 <= int(repeat) <= int(of)):
        raise ConfigError(f"--calibration-repeat {text!r}: expected ID:K/N with 1 <= K <= N (harness calibrate "
                          "writes it)")
    return CalibrationRepeat(id=ident, repeat=int(repeat), of=int(of))
