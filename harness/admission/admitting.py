"""The admit step of qualify: what the command names (suites, candidates, a run directory new or resumed, a baseline)
and admission of every arm of the run, all before anything is started or written. Its value, AdmittedRun, is what
every later step reads."""

from __future__ import annotations

from pathlib import Path

from harness.admission.arms import check_shared_workloads, load_run_arms
from harness.admission.baseline_build import FLAG, resolve_baseline_build
from harness.admission.baseline_build import SUITE as BUILD_OUTPUTS
from harness.admission.pytest_args import check_pytest_args
from harness.admission.record import admitted_repeat
from harness.admission.request import AdmittedRun, QualifyRequest
from harness.admission.rundir import check_baseline, check_resume, choose_run_dir, resume_run_dir
from harness.admission.verdicts import admit, check_parallel, strict_run
from harness.admission.workloads import kv_twins
from harness.config.armset import parse_arm_names
from harness.config.errors import ConfigError
from harness.config.suites import parse_suites
from harness.history.store import check_store_path, history_path
from harness.records.manifest import BaselineBuild, RunManifest, load_manifest


def named_candidates(request: QualifyRequest, resumed: RunManifest | None = None) -> tuple[list[str], str | None]:
    """The candidates and the command-line reference: --arm X [--reference R], --arms a,b, or with --resume alone the
    resumed run's own (its run.json pairs)."""
    if request.arm and request.arms:
        raise ConfigError(f"--arm {request.arm} and --arms {request.arms}: name one candidate with --arm, or several "
                          "with --arms, not both")
    if request.arms:
        if request.reference:
            raise ConfigError(f"--reference {request.reference} with --arms {request.arms}: --reference replaces the "
                              "reference of one candidate (--arm); with --arms each candidate runs against its own "
                              "`reference:` field (an arm YAML with `extends:` and another `reference:` picks another)")
        return parse_arm_names(request.arms), None
    if request.arm:
        return [request.arm], request.reference
    if resumed is None:
        raise ConfigError("qualify: name the candidate arm (--arm NAME) or several (--arms a,b); "
                          "`python -m harness arms` lists them")
    pairs = resumed.pairs or []
    if not pairs:
        raise ConfigError(f"--resume {request.resume}: its run.json names no arms; name the run's arms with --arm or "
                          "--arms")
    if len(pairs) == 1:
        return [pairs[0].candidate], pairs[0].reference
    return [p.candidate for p in pairs], None


def resumed_manifest(request: QualifyRequest) -> tuple[Path, RunManifest]:
    """--resume: the earlier run's directory and its run.json, read once for the whole of admission."""
    run_dir = resume_run_dir(request.resume, request.run_id, request.run_dir)
    manifest, problems = load_manifest(run_dir)
    if manifest is None:
        raise ConfigError(f"--resume {request.resume}: {problems[0]}; name the run's arms with --arm or --arms, or "
                          "start a new run")
    return run_dir, manifest


def admit_run(request: QualifyRequest) -> AdmittedRun:
    """Every check of a qualify, cheapest first: suites and candidates named, the run directory chosen (a resumed
    run's checked against its run.json once its arms are loaded), the baseline, the arms with their shared workloads
    and GPUs, then admission (preflight, workloads, this machine, vLLM) and the pytest arguments."""
    suites = parse_suites(request.suites)
    check_store_path(history_path(), create=True)  # the run is appended at its end: a mistyped store refused now
    run_dir, resumed = resumed_manifest(request) if request.resume else (None, None)
    names, reference = named_candidates(request, resumed)
    if run_dir is None:
        run_dir = choose_run_dir(request.run_id, request.run_dir)
    admitted_repeat(request.calibration_repeat, run_dir, names)  # a marker set by hand: refused before anything
    if request.baseline:
        check_baseline(request.baseline)  # a wrong or corrupt baseline fails now, not after the suites ran
    arms = load_run_arms(names, reference, list(request.overrides))
    suites, baseline_build = build_comparison(request, names, arms.loaded, suites)
    check_shared_workloads(arms, suites)
    arms.loaded.update(kv_twins(arms.candidates, suites))  # admitted and launched like eager variants
    if request.parallel:
        check_parallel(arms)
    if resumed is not None:  # the same arms and suites as run.json recorded; the suites default to the run's own
        suites = check_resume(run_dir, resumed, arms.run_arms, suites if request.suites else None)
    strict = strict_run(request.strict)
    admit(arms, suites, request.vllm_check, strict)
    check_pytest_args(list(request.pytest_args))  # before the run directory: a refused option leaves no empty run
    return AdmittedRun(request=request, run_dir=run_dir, arms=arms, suites=tuple(suites), strict=strict,
                       resumed=resumed, baseline_build=baseline_build)


def build_comparison(request: QualifyRequest, names: list[str], loaded: dict,
                     suites: list[str]) -> tuple[list[str], BaselineBuild | None]:
    """--keep-outputs / --baseline-build: the build_outputs suite joins the run, and the signed-off build is found and
    checked (harness/admission/baseline_build.py); refused with options it cannot stand beside."""
    if not (request.keep_outputs or request.baseline_build):
        return suites, None
    flag = f"{FLAG} {request.baseline_build}" if request.baseline_build else "--keep-outputs"
    if request.resume:
        raise ConfigError(f"{flag} with --resume {request.resume}: a resumed run keeps its own suites and baseline "
                          "build (run.json); resume without it")
    if request.baseline_build and len(names) != 1:
        raise ConfigError(f"{flag} with --arms {request.arms}: a build is compared with its own signed-off build one "
                          "arm at a time; name one candidate with --arm")
    if request.baseline_build and request.baseline:
        raise ConfigError(f"{flag} with --baseline {request.baseline}: the signed-off run is the metric gates' "
                          "baseline too; name one of them")
    build = resolve_baseline_build(request.baseline_build, loaded[names[0]]) if request.baseline_build else None
    return (suites if BUILD_OUTPUTS in suites else [*suites, BUILD_OUTPUTS]), build
