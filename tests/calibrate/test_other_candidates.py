"""A repeat that ran other candidates beside the calibrated arm (`qualify --arms cpu-smoke,cpu-faulty`): only the arm's
own checks, gates and tests judge its calibration, and calibrate says which candidates it left out; the arm's own
failure, or an exit code no other candidate's failed test explains, still refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from drift_lines import repeat
from written_repeats import ARM, write_repeat

from harness.config.errors import ConfigError
from harness.records.manifest import RunPair, load_manifest, write_manifest
from harness.records.schema import OutcomeRecord, ReferenceCheckRecord

OTHER = "cpu-faulty"


def node_id(arm: str) -> str:
    return f"suites/test_teacher_forcing.py::test_teacher_forcing[{arm}]"


def pair_run(run_dir: Path, floor: Path, seed: int, other_failed: bool = True, own_failed: bool = False,
             pytest_code: int | None = None) -> Path:
    """A repeat of ARM that also ran OTHER against the same reference: OTHER's check and test failed (or not), ARM's
    check passed and its test failed (or not); the verdict is pytest's code (1 where any test failed) unless given."""
    write_repeat(run_dir, floor, repeat(seed))
    failed = other_failed or own_failed
    other = ReferenceCheckRecord(run_id=run_dir.name, arm=OTHER, suite="teacher_forcing", check="teacher_forcing",
                                 reference="cpu-ref", reference_key="refkey", passed=not other_failed,
                                 detail="2 request(s) over the limit", requests=2, exact_matches=0,
                                 first_divergence_min=3, max_drift=0.5, nonfinite=0, drift_limit=0.01,
                                 status="complete", floor_path=str(floor.with_name(f"{OTHER}-key")))
    outcomes = [OutcomeRecord(run_id=run_dir.name, arm=arm, suite="teacher_forcing", test=node_id(arm),
                              outcome="failed" if bad else "passed") for arm, bad in ((ARM, own_failed),
                                                                                       (OTHER, other_failed))]
    with (run_dir / "results.jsonl").open("a") as f:
        f.writelines(r.model_dump_json() + "\n" for r in (other, *outcomes))
    manifest, _ = load_manifest(run_dir)
    code = int(failed) if pytest_code is None else pytest_code
    write_manifest(run_dir, manifest.model_copy(update={
        "pairs": [*manifest.pairs, RunPair(candidate=OTHER, reference="cpu-ref")], "exit_code": int(failed or code),
        "pytest_exit_code": code}))
    return run_dir


def calibrate_from(dirs: list[Path], ident: str) -> int:
    from harness.calibrate.command import store_calibration

    return store_calibration(ARM, ident, dirs)


def test_another_candidates_failure_in_the_same_run_leaves_the_arms_calibration_standing(store, tmp_path, capsys):
    """Both repeats ran cpu-faulty beside cpu-smoke, and cpu-faulty failed its check and test (run exit code 1): the
    calibration of cpu-smoke is judged by its own results alone, stored, and its output names what it left out."""
    dirs = [pair_run(tmp_path / "reports" / f"cal-r{k}", store, seed) for k, seed in ((1, 1), (2, 2))]
    assert calibrate_from(dirs, "cal") == 0
    out = capsys.readouterr().out
    for d in dirs:
        assert (f"calibrate {ARM}: {d.name} also ran {OTHER}: only {ARM}'s checks, gates and tests judge its "
                f"calibration; the other candidates' results are left out (failed there: {node_id(OTHER)})") in out
    table = json.loads((tmp_path / "reports" / "cal" / "calibration.json").read_text())
    assert table["failed"] == {} and table["trusted"] is None
    assert (store / "teacher_forcing.calibration.json").is_file()


@pytest.mark.parametrize("case, failed", [
    ("its own test failed", f"test {node_id(ARM)} in repeat 2"),
    # pytest passed, yet the run's verdict is 1 (a gate or a baseline turned it): no test explains it
    ("a verdict no test explains", "exit code 1 in repeat 2"),
])
def test_the_arms_own_failure_in_a_run_of_two_candidates_still_refuses(store, tmp_path, case, failed):
    """Planted: the same pair runs, but in repeat 2 cpu-smoke's own test failed, or the run's verdict failed with no
    other candidate's failed test behind it: refused, naming it and the repeat, nothing written."""
    first = pair_run(tmp_path / "reports" / "bad-r1", store, 1)
    second = (pair_run(tmp_path / "reports" / "bad-r2", store, 2, own_failed=True) if case == "its own test failed"
              else pair_run(tmp_path / "reports" / "bad-r2", store, 2, other_failed=False, pytest_code=0))
    if case != "its own test failed":  # the verdict turned after pytest passed
        manifest, _ = load_manifest(second)
        write_manifest(second, manifest.model_copy(update={"exit_code": 1}))
    with pytest.raises(ConfigError) as refused:
        calibrate_from([first, second], "bad")
    assert f"calibrate {ARM} (bad) refused: its repeats failed against gates.yaml" in str(refused.value)
    assert str(refused.value).split(": ", 3)[3].startswith(failed), str(refused.value)
    assert not (tmp_path / "reports" / "bad").exists() and not (store / "teacher_forcing.calibration.json").exists()
