"""`accept-floor`: a passing run's reference checks of one arm become that pair's known-good floor."""

from __future__ import annotations

from pathlib import Path

from harness.config.errors import ConfigError
from harness.records.manifest import interruption, load_manifest
from harness.records.meaning import of_kind
from harness.records.paths import resolve_path
from harness.records.results import read_results
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.store.floor_store import save_floor
from harness.refcheck.store.reference_store import reference_dir


def accept_floor(run_dir: Path, run: str, arm: str | None) -> None:
    """Mark a run's reference checks of one arm as that pair's known-good floor; refused unless every one passed
    complete in a run that ran to its end (a floor taken from a faulty run would hide the fault in every later run;
    one from an interrupted run would stand for checks that never ran). Prints each floor saved."""
    manifest, unreadable = load_manifest(run_dir)
    stopped = unreadable or interruption(manifest)
    if stopped:
        raise ConfigError(f"accept-floor: {run_dir.name} is not a finished run ({'; '.join(stopped)}); a known-good "
                          "floor comes from a run that ran to its end")
    checks = of_kind(read_results(run_dir / "results.jsonl")[0], ReferenceCheckRecord)
    arms = sorted({r.arm for r in checks if arm is None or r.arm == arm})
    if len(arms) != 1:
        raise ConfigError(f"accept-floor --run {run!r}: needs the reference checks of exactly one arm "
                          f"{'(' + repr(arm) + ')' if arm else '(name it with --arm)'}; "
                          f"found: {', '.join(arms) or 'none'}")
    mine = [r for r in checks if r.arm == arms[0]]
    bad = [f"{r.check}: {r.detail or r.reason}" for r in mine if not r.passed or r.status != "complete"]
    if bad:
        raise ConfigError(f"accept-floor: {arms[0]}'s reference checks in {run_dir.name} did not all pass complete "
                          f"({'; '.join(bad)}); a failing run cannot be the known-good floor")
    # Checks judged on the fixed limit only (the capacity levels' outputs) have no floor to store.
    floored = [r for r in mine if r.floor_path and r.comparisons_path]
    if not floored:
        raise ConfigError(f"accept-floor: none of {arms[0]}'s reference checks in {run_dir.name} is judged against a "
                          f"floor ({', '.join(sorted({r.check for r in mine}))})")
    calibrated = [str(f) for r in floored if (f := floor_here(r.floor_path) / f"{r.check}.calibration.json").is_file()]
    if calibrated:  # the calibration is sealed with its floor: replacing it would leave the check judged by nothing
        raise ConfigError(f"accept-floor: {', '.join(calibrated)} calibrated the key: its floor is the calibration's "
                          f"(sealed with it); calibrate the arm again instead (`python -m harness calibrate --arm "
                          f"{arms[0]}`); nothing was accepted")
    for r in floored:
        path = save_floor(floor_here(r.floor_path), r.check, comparisons_file(run_dir, r.check, r.comparisons_path),
                          {"run": run_dir.name, "arm": r.arm, "reference": r.reference,
                           "reference_key": r.reference_key, "requests": r.requests})
        print(f"floor for {r.check} of {r.arm} vs {r.reference} accepted from {run_dir.name}: {path}")


def floor_here(recorded: str) -> Path:
    """The floor's directory in this machine's reference store: the run recorded an absolute path of the store it
    ran against, which a run directory copied from a CI machine does not have; the key (the directory's name) is
    what later runs look for, under their own store."""
    return reference_dir() / "floors" / Path(recorded).name


def comparisons_file(run_dir: Path, check: str, recorded: str) -> Path:
    """The comparisons file at its recorded path, or in the run directory where the run was copied or moved."""
    path = resolve_path(run_dir, recorded)
    if path is None:
        raise ConfigError(f"accept-floor: the {check} comparisons file {recorded!r} is missing (nor under {run_dir}); "
                          "nothing was accepted for it")
    return path
