"""Whether a stored calibration may judge (pure, but for reading it): sealed as calibrate stored it (floor_store
checks the seal and the floor's hash when reading), and every derived value under the ceilings of the gates the run
judges by. A hand-edited calibration.json (a limit of 200) or one stored before calibrations were sealed is never
used as limits: each check it would judge FAILs "no data", and calibrate does not build on it (replacing it takes
--trust, as replacing an unreadable one does).

Unsealed calibrations (stored before issue 55) are refused, not accepted with a label: accepting them would make
deleting the `sha256` field a way round the seal, and the remedy (calibrate again, stating why with --trust) costs one
calibration, once.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from harness.config.thresholds import CalibrationGates
from harness.judge.calibration import Limits, Spread, ceiling_violations
from harness.refcheck.store.floor_store import Calibration, CalibrationUnreadable, load_calibration


def stored_spread(calibration: Calibration) -> Spread:
    """The Spread a calibration recorded (its fields; the per-request drifts are not kept)."""
    s = calibration.spread
    return Spread(**{f.name: s.get(f.name) for f in fields(Spread) if f.name != "request_drifts"}, request_drifts={})


def standing_problems(calibration: Calibration, file: Path, ceilings: CalibrationGates, where: str) -> list[str]:
    """Why this calibration may not judge: unsealed, or a value above a ceiling of `where`'s gates (one sentence
    each, naming the file); [] when it stands."""
    if calibration.sha256 is None:
        return [f"{file}: unsealed (stored before calibrations carried a content hash): nothing shows it is what "
                "calibrate stored"]
    spread = calibration.spread
    deltas = (spread.get("span_fraction_delta_max"), spread.get("distinct_2_delta_max"))
    limits = Limits(calibration.drift_limit, calibration.tie_gap, calibration.derivation)
    above = ceiling_violations(calibration.check, limits, stored_spread(calibration), ceilings, where, deltas)
    return [f"{file}: above its ceiling: {'; '.join(above)}"] if above else []


def standing_calibration(path: Path, check: str, ceilings: CalibrationGates, where: str) -> Calibration | None:
    """The calibration of `check` at `path` when it may judge; None when there is none; CalibrationUnreadable naming
    the file and why when it cannot be read, was edited, is unsealed or is above a ceiling of `where`."""
    calibration = load_calibration(path, check)
    if calibration is None:
        return None
    problems = standing_problems(calibration, path / f"{check}.calibration.json", ceilings, where)
    if problems:
        raise CalibrationUnreadable("; ".join(problems))
    return calibration
