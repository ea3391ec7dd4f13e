"""The run directory and the runs named on the command line: a new run's directory, a resumed run's (its run.json
must match this command), a baseline with readable records. Checked before anything starts or is written."""

from __future__ import annotations

import re
from pathlib import Path

from harness.config.arms import Arm
from harness.config.errors import ConfigError
from harness.config.paths import REPORTS_DIR, run_id_now
from harness.plan.redact import redact_arm_dump
from harness.records.manifest import RunManifest
from harness.records.results import locate_results, read_results
from harness.records.started import arm_change

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def choose_run_dir(run_id: str | None, run_dir: str | None) -> Path:
    """--run-dir as given, or reports/<run-id>: a run id is one plain name, never a path out of reports/. An existing
    file, or a directory that already holds a run, is refused (records would mix)."""
    if run_dir:
        path = Path(run_dir)
        what = f"--run-dir {run_dir}"
    else:
        rid = run_id or run_id_now()
        if not RUN_ID.match(rid):
            raise ConfigError(f"--run-id {rid!r}: a run id is one name under {REPORTS_DIR} (letters, digits, '.', "
                              "'_', '-'; no '/' or '..'); use --run-dir to write elsewhere")
        path = REPORTS_DIR / rid
        what = f"--run-id {rid}"
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what}: {path} exists and is not a directory; name a new directory")
    if (path / "results.jsonl").exists() or (path / "run.json").exists():
        raise ConfigError(f"{what}: {path} already holds a run; choose a new run id or directory")
    return path


def resume_run_dir(arg: str, run_id: str | None, run_dir: str | None) -> Path:
    """--resume <run id or dir>: an earlier run that holds run.json; never together with --run-id/--run-dir."""
    if run_id or run_dir:
        raise ConfigError(f"--resume {arg}: resumes that run in its own directory; leave out --run-id/--run-dir")
    path = Path(arg)
    if "/" not in arg and not path.is_dir():  # a plain name is a run id under reports/
        if not RUN_ID.match(arg):
            raise ConfigError(f"--resume {arg!r}: a run id is one name under {REPORTS_DIR}, or pass a run directory")
        path = REPORTS_DIR / arg
    if not (path / "run.json").is_file():
        raise ConfigError(f"--resume {arg}: no run there ({path / 'run.json'} does not exist); name an earlier run "
                          f"id under {REPORTS_DIR} or its directory")
    return path


def check_resume(run_dir: Path, manifest: RunManifest, arms: list[Arm], suites: list[str] | None) -> list[str]:
    """The resumed run's arms (resolved fields, compared redacted: a rotated token is no change, and never shown) and
    suites must be the ones run.json recorded: records of two configurations must not mix. Returns the suites to run
    (run.json's when --suites is left out)."""
    recorded = manifest.arms
    if recorded is None:
        raise ConfigError(f"--resume: {run_dir / 'run.json'} names no arms (field 'arms'); it cannot be resumed")
    if list(recorded) != [a.name for a in arms]:
        raise ConfigError(f"--resume: {run_dir / 'run.json'} field 'arms' names {', '.join(recorded)}; this command "
                          f"names {', '.join(a.name for a in arms)}; pass the run's own --arm/--reference")
    changes = [c for a in arms if (c := arm_change(a, recorded[a.name], redact_arm_dump(a.model_dump(mode="json"))))]
    if changes:
        raise ConfigError("--resume: " + "\n".join(changes) + " (or pass the run's own --set)")
    before = manifest.suites
    if before is None:
        raise ConfigError(f"--resume: {run_dir / 'run.json'} has no field 'suites'; it cannot be resumed")
    if suites is not None and sorted(suites) != sorted(before):
        raise ConfigError(f"--resume: --suites {','.join(suites)} differs from the run's suites "
                          f"({','.join(before)} in {run_dir / 'run.json'}); leave --suites out")
    return before


def check_baseline(arg: str) -> Path:
    """--baseline resolves to a results file with at least one readable record: checked now, not after the run."""
    path = locate_results(arg)
    records, problems = read_results(path)
    if not records:
        why = problems[0] if problems else f"{path} is empty"
        raise ConfigError(f"--baseline {arg}: no readable record in {path} ({why}); pass an earlier run's "
                          "directory or its results.jsonl")
    return path


def locate_run_dir(arg: str, command: str = "report") -> Path:
    """`<command> --run`: a run directory, or a run id under reports/, that holds a run (results or run.json)."""
    for path in (Path(arg), REPORTS_DIR / arg):
        if path.is_dir():
            break
    else:
        raise ConfigError(f"{command} --run {arg!r}: no run directory there (looked in . and {REPORTS_DIR})")
    if not (path / "results.jsonl").is_file() and not (path / "run.json").is_file():
        raise ConfigError(f"{command} --run {arg!r}: {path} holds no run (no results.jsonl, no run.json)")
    return path


def refuse_unreadable(arg: str, results: Path, records: list, problems: list[str] | tuple[str, ...],
                      command: str = "report") -> None:
    """A results file none of whose lines could be read is no run to report on: refused, naming the first problem."""
    if results.is_file() and not records and problems:
        raise ConfigError(f"{command} --run {arg!r}: {results} has no readable record; first problem: {problems[0]}")


def find_run_dir(arg: str, command: str = "report") -> Path:
    """locate_run_dir, and a results file with no readable record refused (for commands that read the run later)."""
    path = locate_run_dir(arg, command)
    if (path / "results.jsonl").is_file():
        refuse_unreadable(arg, path / "results.jsonl", *read_results(path / "results.jsonl"), command)
    return path
