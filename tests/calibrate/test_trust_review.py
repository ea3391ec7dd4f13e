"""Ways round the chain of trust found in review (issue 45): each test plants one and must see it refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from drift_lines import repeat
from written_repeats import ARM, write_repeat

from harness.config.errors import ConfigError
from harness.records.manifest import ArmBuild, CalibrationRepeat, RunManifest, RunPair
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.floor_store import load_calibration, load_confirmation


def test_a_copied_run_is_the_same_run_not_a_second_repeat(store, tmp_path):
    """One run copied to another directory (cp -r) is still one run: K = 2 from it would be zero spread, exactly
    what `--from-runs` given the same run twice is refused for."""
    from harness.calibrate.command import store_calibration

    one = write_repeat(tmp_path / "reports" / "cal-r1", store, repeat(1))
    copy = tmp_path / "reports" / "cal-r2"
    shutil.copytree(one, copy)
    with pytest.raises(ConfigError, match="are the same run"):
        store_calibration(ARM, "cal", [one, copy])
    assert load_calibration(store, "teacher_forcing") is None and not (tmp_path / "reports" / "cal").exists()


def test_a_foreign_run_among_the_repeat_directories_is_refused_before_any_repeat_runs(store, tmp_path):
    """reports/<id>-r3 holds another run: refused before repeats 1 and 2 run (hours on a GPU), not after."""
    from harness.calibrate.command import calibrate

    write_repeat(tmp_path / "reports" / "cal-r3", store, repeat(3), calibration=CalibrationRepeat(id="x", repeat=1,
                                                                                                    of=3))
    with pytest.raises(ConfigError, match="holds a run that is not repeat 3 of 3 of this calibration"):
        calibrate(ARM, 3, ["teacher_forcing"], [], lambda argv, env: pytest.fail("a repeat ran"), "cal")
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["cal-r3"]


def test_a_check_not_judged_by_the_first_calibration_does_not_confirm_it(store, tmp_path):
    """A passing record judged by gates.yaml (a resumed run's check judged before the calibration was stored) vouches
    for nothing: only a check the first calibration judged confirms it."""
    from harness.calibrate.command import store_calibration
    from harness.calibrate.trust import confirm_first_calibrations

    dirs = [write_repeat(tmp_path / "reports" / f"cal-r{k}", store, repeat(k)) for k in (1, 2)]
    assert store_calibration(ARM, "cal", dirs) == 0
    cal = load_calibration(store, "teacher_forcing")
    manifest = RunManifest(run_id="night", finished="2026-12-06T01:00:00", exit_code=0,
                           pairs=[RunPair(candidate=ARM, reference="cpu-ref")],
                           builds={ARM: ArmBuild(vllm_version="0.33.0", build_hash="build-b")})

    def record(judged_by: str) -> ReferenceCheckRecord:
        return ReferenceCheckRecord(run_id="night", arm=ARM, suite="teacher_forcing", check="teacher_forcing",
                                    reference="cpu-ref", reference_key="refkey", passed=True, detail="d", requests=40,
                                    exact_matches=40, first_divergence_min=None, max_drift=0.1, nonfinite=0,
                                    drift_limit=0.01, floor_path=str(store), judged_by=judged_by)

    assert confirm_first_calibrations(manifest, [record("gates.yaml, not calibrated: limit 0.01, tie gap 0")]) == []
    assert load_confirmation(store, cal) is None
    assert len(confirm_first_calibrations(manifest, [record(f"{cal.short}; first calibration")])) == 1
    assert load_confirmation(store, cal)["run"] == "night"


def test_a_planted_fault_variant_cannot_be_calibrated_into_the_key_of_the_build_it_varies(store, tmp_path):
    """An arm with `calibration_from: BASE` is judged by BASE's calibration; calibrating it would store the faulty
    variant's spread under BASE's key (judged by gates.yaml where BASE has none): refused, naming the arm to
    calibrate, before any repeat runs or anything is written."""
    from harness.calibrate.command import calibrate, store_calibration
    from harness.config.arms import load_arm

    arms = tmp_path / "arms"
    arms.mkdir()
    for name in ("cpu-smoke", "cpu-ref"):
        (arms / f"{name}.yaml").write_text((Path(__file__).parents[2] / f"configs/arms/{name}.yaml").read_text())
    (arms / "planted.yaml").write_text("extends: cpu-smoke\ncalibration_from: cpu-smoke\n"
                                       "server: {env: {HARNESS_FAULT_L: '64'}}\n")
    planted = load_arm("planted", arms_dir=arms)
    with pytest.raises(ConfigError, match="calibration_from: cpu-smoke.*calibrate --arm cpu-smoke"):
        calibrate("planted", 2, ["teacher_forcing"], [], lambda argv, env: pytest.fail("a repeat ran"), "cal",
                  candidate=planted)
    dirs = [write_repeat(tmp_path / "reports" / f"cal-r{k}", store, repeat(k)) for k in (1, 2)]
    with pytest.raises(ConfigError, match="calibration_from: cpu-smoke"):
        store_calibration("planted", "cal", dirs, candidate=planted)
    assert load_calibration(store, "teacher_forcing") is None and not (tmp_path / "reports" / "cal").exists()


def test_the_refusals_trust_command_keeps_the_calibrations_id(store, tmp_path):
    """The command a refusal offers stores the calibration under the refused one's id (its repeats are <id>-r<k>), not
    under --from-runs' default name."""
    from harness.calibrate.command import store_calibration

    dirs = [write_repeat(tmp_path / "reports" / f"cal-x-r{k}", store, repeat(k), passed=False, exit_code=1)
            for k in (1, 2)]
    with pytest.raises(ConfigError) as refused:
        store_calibration(ARM, "cal-x", dirs)
    assert f"calibrate --arm {ARM} --id cal-x --from-runs {dirs[0]} {dirs[1]} --trust" in str(refused.value)
