"""Ways round the chain of trust found in review (issue 45): each test plants one and must see it refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from drift_lines import repeat
from written_repeats import ARM, asked, write_repeat

from harness.config.errors import ConfigError
from harness.records.manifest import ArmBuild, CalibrationRepeat, RunManifest, RunPair
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.store.floor_store import load_calibration, load_confirmation


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
    from harness.qualify.calibrating import calibrate

    write_repeat(tmp_path / "reports" / "cal-r3", store, repeat(3), calibration=CalibrationRepeat(id="x", repeat=1,
                                                                                                    of=3))
    with pytest.raises(ConfigError, match="holds a run that is not repeat 3 of 3 of this calibration"):
        calibrate(asked(3, ["teacher_forcing"], "cal"), lambda request, env: pytest.fail("a repeat ran"))
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["cal-r3"]


def test_a_check_not_judged_by_the_first_calibration_does_not_confirm_it(store, tmp_path):
    """A passing record judged by gates.yaml (a resumed run's check judged before the calibration was stored) vouches
    for nothing: only a check the first calibration judged confirms it."""
    from harness.calibrate.command import store_calibration
    from harness.calibrate.trust import confirm_calibrations

    dirs = [write_repeat(tmp_path / "reports" / f"cal-r{k}", store, repeat(k)) for k in (1, 2)]
    assert store_calibration(ARM, "cal", dirs) == 0
    cal = load_calibration(store, "teacher_forcing")
    manifest = RunManifest(run_id="night", finished="2026-12-06T01:00:00", exit_code=0,
                           pairs=[RunPair(candidate=ARM, reference="cpu-ref")],
                           builds={ARM: ArmBuild(vllm_version="0.33.0", build_hash="build-b", package_hash="build-b")})

    def record(judged_by: str) -> ReferenceCheckRecord:
        return ReferenceCheckRecord(run_id="night", arm=ARM, suite="teacher_forcing", check="teacher_forcing",
                                    reference="cpu-ref", reference_key="refkey", passed=True, detail="d", requests=40,
                                    exact_matches=40, first_divergence_min=None, max_drift=0.1, nonfinite=0,
                                    drift_limit=0.01, floor_path=str(store), judged_by=judged_by)

    refused = confirm_calibrations(manifest, [record("gates.yaml, not calibrated: limit 0.01, tie gap 0")])
    assert refused == ["calibration cal of cpu-smoke not confirmed by run night: teacher_forcing was not judged by "
                       "calibration cal (judged by: gates.yaml, not calibrated: limit 0.01, tie gap 0)"]
    assert load_confirmation(store, cal) is None
    assert len(confirm_calibrations(manifest, [record(f"{cal.short}; first calibration")])) == 1
    assert load_confirmation(store, cal)["run"] == "night"


def test_a_planted_fault_variant_cannot_be_calibrated_into_the_key_of_the_build_it_varies(store, tmp_path):
    """An arm with `calibration_from: BASE` is judged by BASE's calibration; calibrating it would store the faulty
    variant's spread under BASE's key (judged by gates.yaml where BASE has none): refused, naming the arm to
    calibrate, before any repeat runs or anything is written."""
    from harness.calibrate.command import store_calibration
    from harness.config.arms import load_arm
    from harness.qualify.calibrating import calibrate

    arms = tmp_path / "arms"
    arms.mkdir()
    for name in ("cpu-smoke", "cpu-ref"):
        (arms / f"{name}.yaml").write_text((Path(__file__).parents[2] / f"configs/arms/{name}.yaml").read_text())
    (arms / "planted.yaml").write_text("extends: cpu-smoke\ncalibration_from: cpu-smoke\n"
                                       "server: {env: {HARNESS_FAULT_L: '64'}}\n")
    planted = load_arm("planted", arms_dir=arms)
    with pytest.raises(ConfigError, match="calibration_from: cpu-smoke.*calibrate --arm cpu-smoke"):
        calibrate(asked(2, ["teacher_forcing"], "cal", arm="planted"), lambda request, env: pytest.fail("a repeat ran"),
                  planted)
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


def test_an_unreadable_calibration_is_replaced_only_with_trust(store, tmp_path, capsys):
    """A damaged calibration does not switch the chain of trust off: the next calibration is no "first" one (nothing
    measured judged its repeats), so it is refused naming the file and --trust, nothing written; with --trust it is
    stored and the reason kept."""
    from harness.calibrate.command import store_calibration

    store_calibration(ARM, "cal", [write_repeat(tmp_path / "reports" / f"cal-r{k}", store, repeat(k)) for k in (1, 2)])
    file = store / "teacher_forcing.calibration.json"
    file.write_bytes(b'{"check": "teacher_forcing", "drift_li')
    dirs = [write_repeat(tmp_path / "reports" / f"cal-2-r{k}", store, repeat(k + 2)) for k in (1, 2)]
    with pytest.raises(ConfigError) as refused:
        store_calibration(ARM, "cal-2", dirs)
    message = str(refused.value)
    assert f"the current calibration cannot judge ({file}: not JSON" in message
    assert f"--id cal-2 --from-runs {dirs[0]} {dirs[1]} --trust \"REASON\"" in message and "Nothing was written" in message
    assert file.read_bytes() == b'{"check": "teacher_forcing", "drift_li' and not (tmp_path / "reports" / "cal-2").exists()
    assert store_calibration(ARM, "cal-2", dirs, trust="calibration.json truncated by a full disk") == 0
    stored = load_calibration(store, "teacher_forcing")
    assert stored.calibration == "cal-2" and stored.trusted == "calibration.json truncated by a full disk"
    assert stored.judged_against == "gates.yaml (it replaced a calibration that could not be read)"
    assert "trusted by hand: calibration.json truncated by a full disk" in stored.short + capsys.readouterr().out


@pytest.mark.parametrize("arm, marker, where, why", [
    # the review's bypass: the marker by hand on an uncalibrated GPU arm, in a run directory of qualify's choosing
    ("gpu-mla", "x:1/1", None, "a repeat of x runs in {reports}/x-r1, not {reports}/"),
    ("gpu-mla", "x:1/1", "x-r1", "gpu-mla calibrates with at least 5 repeats, not 1"),  # gates.yaml min_repeats 5
    ("gpu-mla", "x:2/5", "x-r1", "a repeat of x runs in {reports}/x-r2, not {reports}/x-r1"),
])
def test_a_repeat_marker_set_by_hand_is_refused(tmp_path, capsys, monkeypatch, arm, marker, where, why):
    """A repeat is judged without require_floor where its key has no calibration: a marker in a QualifyRequest made
    otherwise than by calibrate would pass an uncalibrated run. Only in the directory calibrate gives repeat K, and
    with N at least the arm's min_repeats. (The command line cannot carry one: test_trust.py.)"""
    import harness.admission.record as record
    import harness.admission.rundir as rundir
    from harness.admission.request import QualifyRequest
    from harness.cli import answered
    from harness.qualify.pipeline import qualify

    reports = tmp_path / "reports"
    monkeypatch.setattr(record, "REPORTS_DIR", reports)
    monkeypatch.setattr(rundir, "REPORTS_DIR", reports)
    request = QualifyRequest(arm=arm, run_dir=str(reports / where) if where else None, calibration_repeat=marker)
    assert answered(lambda: qualify(request)) == 2
    err = capsys.readouterr().err
    assert f"calibration repeat {marker}: refused ({why.format(reports=reports)}" in err
    assert "only `python -m harness calibrate` makes one" in err and err.count("\n") == 1 and not reports.exists()


def test_the_marker_calibrate_sets_is_honoured_in_its_repeats_directory(tmp_path, monkeypatch):
    import harness.admission.record as record

    monkeypatch.setattr(record, "REPORTS_DIR", tmp_path / "reports")
    assert record.admitted_repeat("x:2/5", tmp_path / "reports" / "x-r2", ["gpu-mla"]) == CalibrationRepeat(
        id="x", repeat=2, of=5)
    assert record.admitted_repeat(None, tmp_path / "elsewhere", ["gpu-mla"]) is None


def test_a_repeats_report_says_it_is_not_a_qualification():
    """Its exit code 0 says only that its checks passed (without require_floor on a first calibration): the
    annotation's verdict line and the headline say it is no qualification, so it cannot be pasted as a PASS."""
    from harness.report.render import annotation, not_a_qualification

    cal = CalibrationRepeat(id="cal-x", repeat=2, of=5)
    note = annotation([("gpu-mla", "gpu-ref")], 0, "tables", repeat=cal)
    first = note.splitlines()[0]
    assert first.startswith("## calibration repeat 2 of 5 of cal-x: not a qualification") and "PASS" not in first
    assert first.endswith(": gpu-mla vs gpu-ref (exit code 0)")
    assert not_a_qualification(cal)[0].startswith("calibration repeat 2 of 5 of cal-x: not a qualification")
    assert annotation([("gpu-mla", "gpu-ref")], 0, "t").startswith("## DCP qualification PASSED: gpu-mla vs gpu-ref")
    assert not_a_qualification(None) == []


def test_a_repeats_rendered_headline_opens_with_it(store, tmp_path):
    from harness.report.render import render_run

    run = write_repeat(tmp_path / "reports" / "cal-x-r2", store, repeat(1),
                       calibration=CalibrationRepeat(id="cal-x", repeat=2, of=5))
    render_run(run)
    assert (run / "tables" / "headline.md").read_text().startswith("- calibration repeat 2 of 5 of cal-x: not a "
                                                                   "qualification")
