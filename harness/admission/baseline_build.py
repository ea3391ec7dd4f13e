"""`qualify --baseline-build [RUN]`: the signed-off build a candidate build is compared with, found and checked before
anything starts (docs/gates.md "Build vs build").

Signed off: a finished qualify run whose verdict was PASS (run.json exit_code 0, no calibration repeat) with the arm
as a candidate, and whose run stored that arm's outputs (it ran with --keep-outputs or --baseline-build:
<run>/<arm>/build_outputs.json). "Last": the newest such run in the history store. A run that is none of that, or of
another arm, model or arm configuration, is refused (exit 2) with one sentence naming the run and the field; so is a
missing build pin, or stored outputs of another model or configuration (harness/refcheck/judging/build_outputs.py)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.admission.rundir import locate_run_dir
from harness.config.arms import Arm, defining_file
from harness.config.errors import ConfigError
from harness.history.signed_off import passed_runs_of
from harness.history.store import connect, history_path, named
from harness.records.manifest import BaselineBuild, ManifestProblem, RunManifest, read_manifest
from harness.refcheck.judging import build_outputs as bo
from harness.refcheck.store.reference_store import model_identity

SUITE = bo.CHECK  # the suite that stores and compares the outputs
LAST = "last"
FLAG = "--baseline-build"


def has_outputs(run_dir: Path, arm: str) -> bool:
    return bo.outputs_path(run_dir, arm).is_file()


def pin_problems(arm: Arm) -> list[str]:
    """The arm's build pin points at something that exists: launcher.python a file, every server.env PYTHONPATH entry
    a directory."""
    out = []
    if arm.launcher.python and not Path(arm.launcher.python).is_file():
        out.append(f"{defining_file(arm, 'launcher')}: field launcher.python: {arm.launcher.python} is no file")
    for entry in filter(None, arm.server.env.get(bo.PIN_ENV, "").split(os.pathsep)):
        if not Path(entry).is_dir():
            out.append(f"{defining_file(arm, 'server')}: field server.env.{bo.PIN_ENV}: {entry} is no directory")
    return out


def outputs_problem(run_dir: Path, arm: Arm) -> str | None:
    """Why the run's stored outputs cannot be the arm's baseline (unreadable, another arm, model or configuration),
    naming the file; None when they can."""
    path = bo.outputs_path(run_dir, arm.name)
    mismatch = bo.meta_mismatch(bo.read_doc(path)["meta"], arm, model_identity(arm))
    return f"{path}: no baseline for arm {arm.name}: {mismatch}" if mismatch else None


def not_signed_off(manifest: RunManifest, arm: str, has_outputs: bool) -> str | None:
    """Why the run signs no build of `arm` off (None: it does)."""
    candidates = [p.candidate for p in manifest.pairs]
    if arm not in candidates:
        return f"it qualified {', '.join(candidates) or 'no candidate'}, not arm {arm!r}"
    if manifest.calibration is not None:
        return "it is a calibration repeat, not a qualification"
    if manifest.finished is None or manifest.exit_code is None:
        return "it never finished (run.json has no end)"
    if manifest.exit_code != 0:
        return f"its verdict was not PASS (run.json exit_code {manifest.exit_code})"
    if not has_outputs:
        return f"it stored no outputs of {arm} (build_outputs.json): a run keeps them with --keep-outputs or {FLAG}"
    return None


def baseline_of(run_dir: Path, manifest: RunManifest, arm: Arm) -> BaselineBuild:
    build = (manifest.builds or {}).get(arm.name)
    return BaselineBuild(run_id=manifest.run_id or run_dir.name, run_dir=str(run_dir.resolve()), arm=arm.name,
                         build_hash=build.build_hash if build else None,
                         vllm_version=build.vllm_version if build else None)


def last_signed_off(arm: Arm) -> tuple[Path, RunManifest]:
    """The newest passed run of the arm in the history whose directory still holds its outputs."""
    path = history_path()
    if not path.is_file():
        raise ConfigError(f"{FLAG}: no signed-off build of {arm.name}: no history at {named(path)}; sign the shipped "
                          f"build off first: `python -m harness qualify --arm {arm.name} --keep-outputs`")
    with connect(path) as db:
        runs = passed_runs_of(db, arm.name)
    for run_dir in runs:
        try:
            manifest = read_manifest(run_dir)
        except ManifestProblem:
            continue
        if not_signed_off(manifest, arm.name, has_outputs(run_dir, arm.name)) is None:
            return run_dir, manifest
    raise ConfigError(f"{FLAG}: no signed-off build of {arm.name} in {named(path)} ({len(runs)} passed runs, none "
                      f"with its outputs stored); sign the shipped build off first: `python -m harness qualify --arm "
                      f"{arm.name} --keep-outputs`, or name a run: {FLAG} RUN")


def named_run(arg: str, arm: Arm) -> tuple[Path, RunManifest]:
    run_dir = locate_run_dir(arg, f"qualify {FLAG}")
    try:
        manifest = read_manifest(run_dir)
    except ManifestProblem as exc:
        raise ConfigError(f"{FLAG} {arg}: {exc}") from None
    why = not_signed_off(manifest, arm.name, has_outputs(run_dir, arm.name))
    if why:
        raise ConfigError(f"{FLAG} {arg}: run {run_dir.name} signs no build of {arm.name} off: {why}; name a passed "
                          f"run of {arm.name}, or `{FLAG}` alone for the last one")
    return run_dir, manifest


def resolve_baseline_build(arg: str, arm: Arm) -> BaselineBuild:
    """The signed-off run `arg` names (LAST: the newest), checked against the candidate arm: its build pin exists and
    the stored outputs are of this arm's model and configuration."""
    problems = pin_problems(arm)
    if problems:
        raise ConfigError(f"{FLAG}: arm {arm.name}'s build pin: " + "; ".join(problems))
    run_dir, manifest = last_signed_off(arm) if arg == LAST else named_run(arg, arm)
    problem = outputs_problem(run_dir, arm)
    if problem:
        raise ConfigError(f"{FLAG}: {problem}")
    return baseline_of(run_dir, manifest, arm)
