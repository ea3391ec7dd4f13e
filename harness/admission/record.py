"""The record-the-run step: run.json at a run's start, or one more `resumed` entry in a resumed run's; and the
StartedRun the suites run, built from the admitted run and that run.json."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from harness.admission.request import AdmittedRun
from harness.config.arms import Arm
from harness.config.armset import ArmSet, Pair
from harness.config.errors import ConfigError
from harness.config.paths import REPORTS_DIR
from harness.config.suites import default_suites, per_arm_suites
from harness.config.thresholds import for_run, load_gates
from harness.config.variants import plan_variant
from harness.plan.build import arm_build
from harness.plan.redact import redact_argv, redact_arm_dump
from harness.records.manifest import (
    ArmBuild,
    BaselineBuild,
    CalibrationRepeat,
    Resume,
    RunManifest,
    RunPair,
    write_manifest,
)
from harness.records.runinfo import model_qualities, now, start_manifest, workload_dumps
from harness.records.started_run import StartedRun


@dataclass(frozen=True)
class RunStart:
    """What run.json records of a new run beside its arms and suites: the seeds its checks run under, the calibration
    repeat it is (if one), each arm's vLLM build."""

    order_seed: int = 0
    length_seed: int | None = None
    calibration: CalibrationRepeat | None = None
    builds: dict[str, ArmBuild] | None = None
    baseline_build: BaselineBuild | None = None


def record_run_start(run_dir: Path, arms: list[Arm], argv: list[str], suites: list[str] | None = None,
                     arm_set: ArmSet | None = None, strict: bool = False, start: RunStart = RunStart()) -> RunManifest:
    """run.json at the start: harness version, commit, host, argv, suites, the first candidate's workloads and gate
    thresholds, the pairs (each candidate with its reference, gate thresholds and workloads: the report recomputes the
    gates and finds missing levels with these) and the arms (candidates first), secrets redacted. Without `arm_set`
    the first arm is the candidate of the second."""
    suites = suites if suites is not None else default_suites()
    manifest = start_manifest(run_dir.name, {a.name: redact_arm_dump(a.model_dump(mode="json")) for a in arms},
                              redact_argv(argv), suites, workload_dumps(arms[0]) if arms else {})
    manifest.per_arm_suites = per_arm_suites(suites)
    manifest.order_seed = start.order_seed
    if start.length_seed is not None:
        manifest.length_seed = start.length_seed
    if start.calibration is not None:
        manifest.calibration = start.calibration
    if start.builds is not None:
        manifest.builds = start.builds
    if start.baseline_build is not None:
        manifest.baseline_build = start.baseline_build
    models = model_qualities({a.name: a.model.local_dir() for a in arms})
    if models:
        manifest.models = models
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
    return manifest


def note_resume(run_dir: Path, manifest: RunManifest, argv: list[str]) -> RunManifest:
    """run.json keeps its first start; each resume adds when and how (the end time and exit code are the last)."""
    resume = Resume(started=now(), argv=redact_argv(argv), exit_code_before=manifest.exit_code)
    resumed = manifest.model_copy(update={"resumed": [*(manifest.resumed or []), resume]})
    write_manifest(run_dir, resumed)
    return resumed


def record_run(run: AdmittedRun) -> RunManifest:
    """A new run's run.json, or one more `resumed` entry in the resumed run's (as admission read it): written for the
    suites' plugin and for a later resume; this process goes on with the value returned."""
    request = run.request
    if run.resumed is not None:
        return note_resume(run.run_dir, run.resumed, list(request.argv))
    start = RunStart(request.order_seed,
                     request.length_seed if request.length_seed is not None else fresh_length_seed(),
                     repeat_variant(calibration_repeat(request.calibration_repeat), run),
                     arm_builds(run.arms.run_arms), run.baseline_build)
    return record_run_start(run.run_dir, run.arms.run_arms, list(request.argv), list(run.suites), run.arms.arm_set,
                            run.strict, start)


def arm_builds(arms: list[Arm]) -> dict[str, ArmBuild]:
    """Each arm's vLLM build, as its server will import it (a package hashed once: harness/plan/build.py caches)."""
    return {arm.name: ArmBuild(**arm_build(arm).as_dict()) for arm in arms}


def fresh_length_seed() -> int:
    """A new run's own seed for the long_context sweep's jittered lengths: every run checks other lengths."""
    return secrets.randbelow(2**31 - 1) + 1


def calibration_repeat(text: str | None) -> CalibrationRepeat | None:
    """ID:K/N (the QualifyRequest's calibration_repeat, set by `harness calibrate` alone) as the manifest's field."""
    if not text:
        return None
    ident, _, count = text.rpartition(":")
    repeat, _, of = count.partition("/")
    if not (ident and repeat.isdigit() and of.isdigit() and 1 <= int(repeat) <= int(of)):
        raise ConfigError(f"calibration repeat {text!r}: expected ID:K/N with 1 <= K <= N; only `python -m harness "
                          "calibrate` sets it")
    return CalibrationRepeat(id=ident, repeat=int(repeat), of=int(of))


def repeat_variant(marker: CalibrationRepeat | None, run: AdmittedRun) -> CalibrationRepeat | None:
    """The repeat with the variant its server runs under: the plan's for its candidate and repeat number
    (harness/config/variants.py plan_variant: the same that `calibrate` printed for it)."""
    if marker is None:
        return None
    candidate = run.arms.loaded[run.arms.arm_set.candidates[0]]
    return marker.model_copy(update={"variant": plan_variant(candidate, marker.repeat)})


def admitted_repeat(text: str | None, run_dir: Path, candidates: list[str]) -> CalibrationRepeat | None:
    """The marker as `calibrate` sets it, or refused: a repeat is judged without require_floor where its key has no
    calibration, so a marker set otherwise would pass an uncalibrated run. Honoured only in the directory calibrate
    gives repeat K (reports/<ID>-r<K>) and with N at least each candidate's calibration.min_repeats."""
    marker = calibration_repeat(text)
    if marker is None:
        return None
    need = max((load_gates(c).calibration.min_repeats for c in candidates), default=1)
    home = REPORTS_DIR / f"{marker.id}-r{marker.repeat}"
    if run_dir.resolve() != home.resolve() or marker.of < need:
        why = (f"a repeat of {marker.id} runs in {home}, not {run_dir}" if run_dir.resolve() != home.resolve() else
               f"{', '.join(candidates)} calibrates with at least {need} repeats, not {marker.of}")
        raise ConfigError(f"calibration repeat {text}: refused ({why}): only `python -m harness calibrate` makes one; "
                          "nothing was run or written")
    return marker


def started_run(run: AdmittedRun, manifest: RunManifest) -> StartedRun:
    """The value the suites run: the admitted arms and pairs, run.json as record_run wrote it, and this attempt's
    flags (the one place a qualify run and a by-hand pytest run both build it)."""
    request = run.request
    return StartedRun(run.run_dir, manifest, dict(run.arms.loaded), run.arms.arm_set, parallel=request.parallel,
                      resume=request.resume is not None, refresh_reference=request.refresh_reference)
