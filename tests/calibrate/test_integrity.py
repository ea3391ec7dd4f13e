"""Integrity of the chain of trust (issue 55 item 5): a calibration records the content hashes of its repeats, its
floor and its own; one edited after calibrate stored it (a limit of 200), unsealed, or above the ceilings of the
run's gates judges nothing (each check it would judge FAILs "no data", naming the file and what to do) and calibrate
does not build on it; a copied run is refused however it was renamed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from check_fields import check_fields
from drift_lines import repeat
from written_repeats import ARM, BF16_CEILINGS, NOISE, write_repeat

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.thresholds import CalibrationGates, ReferenceCheckGates
from harness.refcheck.store.floor_store import load_calibration, seal_of


def calibrated(tmp_path: Path, store: Path, ident: str = "cal", seeds=(1, 2)) -> list[Path]:
    from harness.calibrate.command import store_calibration

    dirs = [write_repeat(tmp_path / "reports" / f"{ident}-r{k}", store, repeat(s)) for k, s in enumerate(seeds, 1)]
    assert store_calibration(ARM, ident, dirs) == 0
    return dirs


def judged(store: Path):
    """The check as a run would judge it now: its limits and a clean run's verdict."""
    from harness.refcheck.judging.check import ReferenceCheck, check_limits

    limits = check_limits(ReferenceCheckGates(require_floor=True), load_arm(ARM), "teacher_forcing", NOISE)
    return limits, ReferenceCheck(limits).judge(check_fields("teacher_forcing"), repeat(7), False).fields


def edit(file: Path, reseal: bool = False, drop_seal: bool = False, **fields) -> None:
    doc = {**json.loads(file.read_text()), **fields}
    if drop_seal:
        doc.pop("sha256")
    if reseal:
        doc["sha256"] = seal_of(doc)
    file.write_text(json.dumps(doc, indent=1))


def test_a_stored_calibration_records_its_repeats_floor_and_own_hash_and_judges(store, tmp_path):
    import hashlib

    dirs = calibrated(tmp_path, store)
    cal = load_calibration(store, "teacher_forcing")
    assert [h["run"] for h in cal.repeat_hashes] == ["cal-r1", "cal-r2"]
    assert cal.repeat_hashes[0]["results_sha256"] == hashlib.sha256((dirs[0] / "results.jsonl").read_bytes()).hexdigest()
    assert cal.repeat_hashes[0]["run_json_sha256"] == hashlib.sha256((dirs[0] / "run.json").read_bytes()).hexdigest()
    assert cal.floor_sha256 == hashlib.sha256((store / "teacher_forcing.jsonl").read_bytes()).hexdigest()
    doc = json.loads((store / "teacher_forcing.calibration.json").read_text())
    assert doc["sha256"] == seal_of(doc) == cal.sha256
    table = json.loads((tmp_path / "reports" / "cal" / "calibration.json").read_text())
    assert table["repeat_hashes"] == cal.repeat_hashes
    limits, out = judged(store)
    assert limits.problem is None and limits.calibration == cal and out.passed


@pytest.mark.parametrize("damage, why", [
    ("limit 200", "edited after calibrate stored it (its content hash"),
    ("limit 200, resealed", "above its ceiling: teacher_forcing: drift limit 200"),
    ("seal removed", "unsealed (stored before calibrations carried a content hash)"),
    ("floor edited", "its floor teacher_forcing.jsonl was edited or replaced after calibrate stored it"),
])
def test_an_edited_or_over_ceiling_calibration_fails_every_check_it_would_judge(store, tmp_path, damage, why):
    """Planted: each way round the seal and the ceilings. The check FAILs "no data" naming the file and the remedy;
    never judged by gates.yaml in its place, never by the edited limit."""
    calibrated(tmp_path, store)
    file = store / "teacher_forcing.calibration.json"
    if damage == "floor edited":
        floor = store / "teacher_forcing.jsonl"
        floor.write_text(floor.read_text().replace("0.0", "0.3", 5))
    else:
        edit(file, reseal="resealed" in damage, drop_seal=damage == "seal removed",
             **({"drift_limit": 200.0} if "200" in damage else {}))
    limits, out = judged(store)
    assert limits.calibration is None and why in limits.problem and str(file) in limits.problem
    assert not out.passed and out.floor.startswith(f"FAIL (no data: calibration {file}: ")
    assert why in out.floor and "calibrate --arm cpu-smoke --trust \"REASON\"" in out.floor


def test_ceilings_are_those_of_the_runs_gates(store, tmp_path):
    """The same sealed calibration judged under tighter ceilings (the run's recorded gates) is above them."""
    from harness.refcheck.judging.check import check_limits

    calibrated(tmp_path, store)
    cal = load_calibration(store, "teacher_forcing")
    tight = CalibrationGates(**{**BF16_CEILINGS, "max_drift_limits": {"teacher_forcing": cal.drift_limit / 2}})
    limits = check_limits(ReferenceCheckGates(require_floor=True), load_arm(ARM), "teacher_forcing", NOISE,
                          ceilings=tight)
    assert limits.calibration is None and "above its ceiling" in limits.problem
    assert "calibration.max_drift_limits.teacher_forcing in the run's gates, arm cpu-smoke" in limits.problem


@pytest.mark.parametrize("damage", ["limit 200", "limit 200, resealed", "seal removed"])
def test_calibrate_does_not_build_on_an_edited_calibration(store, tmp_path, damage):
    """The next calibration is not judged by it (nothing measured vouches for it): refused naming the file, nothing
    written; only --trust replaces it, and says so."""
    from harness.calibrate.command import store_calibration

    calibrated(tmp_path, store)
    file = store / "teacher_forcing.calibration.json"
    edit(file, reseal="resealed" in damage, drop_seal=damage == "seal removed",
         **({"drift_limit": 200.0} if "200" in damage else {}))
    before = file.read_text()
    dirs = [write_repeat(tmp_path / "reports" / f"next-r{k}", store, repeat(k + 4)) for k in (1, 2)]
    with pytest.raises(ConfigError) as refused:
        store_calibration(ARM, "next", dirs)
    assert f"the current calibration cannot judge ({file}: " in str(refused.value)
    assert file.read_text() == before and not (tmp_path / "reports" / "next").exists()
    assert store_calibration(ARM, "next", dirs, trust="the old calibration was edited by hand; recalibrated") == 0
    assert load_calibration(store, "teacher_forcing").trusted == "the old calibration was edited by hand; recalibrated"


@pytest.mark.parametrize("how", ["run_id edited", "renamed throughout"])
def test_a_copied_run_under_a_new_id_is_refused(store, tmp_path, how):
    """Planted: a copy whose run.json run_id (and start) was edited, or whose every mention of the run's name was
    rewritten: the same records (their times are the run's own) -- refused as one run given twice."""
    from harness.calibrate.command import store_calibration

    one = write_repeat(tmp_path / "reports" / "cal-r1", store, repeat(1))
    copy = tmp_path / "reports" / "cal-r2"
    shutil.copytree(one, copy)
    manifest = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**manifest, "run_id": "cal-r2", "started": "2026-12-05T07:30:00"}))
    if how == "renamed throughout":
        (copy / "results.jsonl").write_text((copy / "results.jsonl").read_text().replace("cal-r1", "cal-r2"))
    with pytest.raises(ConfigError, match="are the same run \\(the same results.jsonl content under another run id"):
        store_calibration(ARM, "cal", [one, copy])
    assert load_calibration(store, "teacher_forcing") is None and not (tmp_path / "reports" / "cal").exists()


def test_the_repeats_of_the_calibration_in_force_cannot_be_a_new_one(store, tmp_path):
    """Copies of the current calibration's own repeats (renamed, ids edited) are no new measurement: refused."""
    from harness.calibrate.command import store_calibration

    dirs = calibrated(tmp_path, store)
    again = []
    for k, d in enumerate(dirs, 1):
        new = tmp_path / "reports" / f"again-r{k}"
        shutil.copytree(d, new)
        again.append(new)
    with pytest.raises(ConfigError, match="is repeat cal-r1 of the calibration in force"):
        store_calibration(ARM, "again", again)
