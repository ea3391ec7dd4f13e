"""`calibrate` over recorded repeats: each repeat's QualifyRequest (order seed, the repeat marker) and environment, the
calibration stored under the floor key and then used by later runs (limits and floor), and the refusals that keep a bad
calibration out: an aborted check, a check missing from a repeat, a key that changed, a repeat that was refused (the
chain of trust and the other refusals of issue 45: test_trust.py)."""

import json
from pathlib import Path

import pytest
from check_fields import check_fields
from drift_lines import repeat
from written_repeats import ARM, NOISE, asked, marker, write_repeat

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.thresholds import ReferenceCheckGates
from harness.records.manifest import CalibrationRepeat
from harness.refcheck.store.floor_store import load_calibration, load_floor


def test_calibrate_runs_k_repeats_and_later_runs_are_judged_by_what_it_stored(store, tmp_path, capsys):
    from harness.admission.request import QualifyRequest
    from harness.qualify.calibrating import calibrate
    from harness.refcheck.judging.check import ReferenceCheck, check_limits

    ran = []

    def run_repeat(request: QualifyRequest, env: dict[str, str]) -> int:
        ran.append((request, env))
        k = int(env["HARNESS_CALIBRATION_REPEAT"])
        write_repeat(Path(request.run_dir), store, repeat(k), calibration=marker(request))
        return 0

    assert calibrate(asked(3, ["teacher_forcing"], "cal-x", vllm_check=False, overrides=("server.x=1",)),
                     run_repeat) == 0
    request, env = ran[1]
    assert request == QualifyRequest(arm=ARM, run_dir=str(tmp_path / "reports" / "cal-x-r2"), suites="teacher_forcing",
                                     order_seed=2, length_seed=1, calibration_repeat="cal-x:2/3",
                                     overrides=("server.x=1",), vllm_check=False)
    assert env == {"HARNESS_CALIBRATION_REPEAT": "2"}
    calibration = load_calibration(store, "teacher_forcing")
    assert calibration.repeats == 3 and calibration.calibration == "cal-x" and calibration.drift_limit > 0.1
    assert calibration.false_positives.startswith("held out: 0/3 repeats fail the others' limits or floor (95 % CI 0-71 %;")
    # its limits at the run's budget: every check calibrated for the arm, this one included (not the catalogue's)
    assert "alpha 0.0017: alpha 0.01/1 per check, 1 % per run (m = 1: the checks calibrated for cpu-smoke)" in \
        calibration.derivation
    floor = load_floor(store, "teacher_forcing")
    assert len(floor.comparisons) == 40 and "the calibration cal-x (mean of 3 clean repeats" in floor.name
    table = (tmp_path / "reports" / "cal-x" / "calibration.md").read_text()
    assert "| teacher_forcing (cpu-ref) | 3 | 100% |" in table and "0.01 -> " in table
    assert json.loads((tmp_path / "reports" / "cal-x" / "calibration.json").read_text())["vllm"] == ["0.32.0"]
    assert "calibration of cpu-smoke stored" in capsys.readouterr().out

    limits = check_limits(ReferenceCheckGates(require_floor=True), load_arm(ARM), "teacher_forcing", NOISE)
    assert limits.calibration == calibration and limits.drift_limit == calibration.drift_limit
    assert limits.judged_by.startswith("calibrated ") and "(K=3, held out: 0/3 repeats fail" in limits.judged_by
    fields = check_fields("teacher_forcing")
    clean = ReferenceCheck(limits).judge(fields, repeat(7), False).fields
    # K = 3 held-out shifts: the run-level floor test (drift_floor.judge_run_level), not per-request pairs
    assert clean.passed and clean.floor.startswith("PASS: run-level shift of the mean |delta|"), clean.floor
    # K = 3 at the run's budget (harness/judge/error_budget.py): a bound wide enough for skewed run-level noise
    shifted = ReferenceCheck(limits).judge(fields, repeat(8, shift=0.03), False).fields
    assert not shifted.passed and "FAIL: " in shifted.floor


def test_a_first_calibrations_repeat_is_judged_by_gates_yaml_without_require_floor(store):
    """With no calibration for the key (the arm's first), a repeat has nothing but gates.yaml to be judged by: its
    limits, require_floor not applied (the repeats are what the first floor is made of)."""
    from harness.refcheck.judging.check import ReferenceCheck, check_limits

    limits = check_limits(ReferenceCheckGates(require_floor=True), load_arm(ARM), "teacher_forcing", NOISE,
                          CalibrationRepeat(id="cal-x", repeat=2, of=3))
    assert limits.calibration is None and not limits.require_floor
    out = ReferenceCheck(limits).judge(check_fields("teacher_forcing"), repeat(1), False).fields
    assert out.passed and out.floor.startswith("calibration repeat 2 of 3: no calibration or accepted floor to pair "
                                               "with (the arm's first calibration")
    assert out.judged_by == ("gates.yaml (calibration cal-x, repeat 2 of 3: the arm's first calibration, no "
                             "calibration to judge it by): limit 0.01, tie gap 0")


@pytest.mark.parametrize("fault, message", [
    ("aborted", "stopped early"),
    ("missing", "did not run in every repeat"),
    ("other key", "floor key changed between repeats"),
    ("nonfinite", r"non-finite logprob\(s\) in clean repeats"),
])
def test_a_calibration_is_refused_when_a_repeat_cannot_stand_for_the_build(store, tmp_path, fault, message):
    from harness.calibrate.command import store_calibration

    dirs = [tmp_path / "reports" / f"cal-r{k}" for k in (1, 2)]
    write_repeat(dirs[0], store, repeat(1))
    second = repeat(2)
    if fault == "nonfinite":
        second[0] = second[0].model_copy(update={"finite": False})
    write_repeat(dirs[1], store if fault != "other key" else store.with_name("other"), second,
                 status="aborted" if fault == "aborted" else "complete",
                 check="graph_replay" if fault == "missing" else "teacher_forcing")
    with pytest.raises(ConfigError, match=message):
        store_calibration(ARM, "cal", dirs)
    assert load_calibration(store, "teacher_forcing") is None


def test_a_repeat_refused_or_interrupted_stops_the_calibration(store):
    from harness.qualify.calibrating import calibrate

    with pytest.raises(ConfigError, match="repeat 1 .* exited 2 .refused before its checks ran"):
        calibrate(asked(2, None, "cal-y"), lambda request, env: 2)
    with pytest.raises(ConfigError, match="'gsm8k' is not a suite with checks to calibrate; calibrate takes "):
        calibrate(asked(2, ["gsm8k"], "cal-z"), lambda request, env: 0)


def test_the_calibrate_command_refuses_fewer_than_two_repeats(capsys):
    from harness.cli import main

    with pytest.raises(SystemExit):
        main(["calibrate", "--arm", ARM, "--repeats", "1"])
    assert "give a whole number of at least 2" in capsys.readouterr().err




def test_running_the_same_calibration_again_keeps_finished_repeats_and_redoes_an_interrupted_one(store, tmp_path):
    from harness.qualify.calibrating import calibrate

    reports = tmp_path / "reports"
    for k, finished in ((1, "2026-12-04T20:00:00"), (2, None)):  # repeat 2 was cut by a time limit
        write_repeat(reports / f"cal-r{k}", store, repeat(k), finished=finished, exit_code=0 if finished else None,
                     calibration=CalibrationRepeat(id="cal", repeat=k, of=3))
    ran = []

    def run_repeat(request, env: dict[str, str]) -> int:
        k = int(env["HARNESS_CALIBRATION_REPEAT"])
        ran.append(k)
        write_repeat(Path(request.run_dir), store, repeat(k), calibration=marker(request))
        return 0

    assert calibrate(asked(3, ["teacher_forcing"], "cal"), run_repeat) == 0
    assert ran == [2, 3] and load_calibration(store, "teacher_forcing").repeats == 3


def test_diverged_outputs_are_kept_with_both_sides_and_read_back_as_the_degeneration_measures(tmp_path):
    from harness.calibrate.repeats import repetition_deltas
    from harness.measure.generation import Generation
    from harness.refcheck.judging.compare import compare_outputs
    from harness.refcheck.judging.comparisons import BatchComparisons, write_diverged_outputs

    ref = {"a": Generation([1, 2, 3, 4, 5, 6], [-0.1] * 6, [{1: -0.1, 9: -0.2}] * 6),
           "b": Generation([7, 8, 9], [-0.1] * 3, [{7: -0.1, 2: -3.0}] * 3)}
    looped = Generation([1, 2, 5, 5, 5, 5], [-0.1] * 6, [{}] * 6)
    run = BatchComparisons([compare_outputs("a", 4, looped, ref["a"]), compare_outputs("b", 4, ref["b"], ref["b"])],
                   outputs={"a": looped.token_ids, "b": ref["b"].token_ids})
    path = tmp_path / "graph_replay_vs_r_diverged_outputs.jsonl"
    write_diverged_outputs(run, ref, path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["request"], r["first_divergence"], r["candidate"], r["reference"]) for r in rows] == [
        ("a", 2, [1, 2, 5, 5, 5, 5], [1, 2, 3, 4, 5, 6])]  # the exact request "b" is not kept
    (span_up, distinct_down), = repetition_deltas(path)
    assert span_up > 0.4 and distinct_down > 0.3


def test_an_unknown_arm_is_refused_before_any_repeat_runs(capsys, tmp_path, monkeypatch):
    from harness.cli import main

    monkeypatch.setenv("HARNESS_REPORTS_DIR", str(tmp_path))
    assert main(["calibrate", "--arm", "nope", "--no-vllm-check"]) == 2
    err = capsys.readouterr()
    assert "unknown arm 'nope'" in err.err and "repeat 1" not in err.out and list(tmp_path.iterdir()) == []


def test_a_run_directory_that_is_no_repeat_of_this_calibration_is_never_deleted(store, tmp_path):
    from harness.qualify.calibrating import calibrate
    from harness.records.manifest import RunManifest, write_manifest

    other = tmp_path / "reports" / "nightly-r1"
    write_manifest(other, RunManifest(finished="2026-12-04T20:00:00", exit_code=0))
    with pytest.raises(ConfigError, match="holds a run that is not repeat 1 of 2 of this calibration"):
        calibrate(asked(2, ["teacher_forcing"], "nightly"), lambda request, env: 0)
    assert (other / "run.json").is_file()


def test_a_planted_fault_variant_is_judged_by_the_calibration_of_the_build_it_varies(store, tmp_path):
    from harness.calibrate.command import store_calibration
    from harness.refcheck.judging.check import check_limits

    dirs = [tmp_path / "reports" / f"cal-r{k}" for k in (1, 2)]
    for k, d in enumerate(dirs, 1):
        write_repeat(d, store, repeat(k))
    store_calibration(ARM, "cal", dirs)
    arms = tmp_path / "arms"
    arms.mkdir()
    (arms / "cpu-smoke.yaml").write_text((Path(__file__).parents[2] / "configs/arms/cpu-smoke.yaml").read_text())
    (arms / "cpu-ref.yaml").write_text((Path(__file__).parents[2] / "configs/arms/cpu-ref.yaml").read_text())
    (arms / "faulty.yaml").write_text("extends: cpu-smoke\nserver: {env: {HARNESS_FAULT_L: '64'}}\n")
    (arms / "planted.yaml").write_text("extends: faulty\ncalibration_from: cpu-smoke\n")
    gates = ReferenceCheckGates(require_floor=True)
    own = check_limits(gates, load_arm("faulty", arms_dir=arms), "teacher_forcing", NOISE)
    assert own.calibration is None and own.floor_path != store  # another config: its own (missing) calibration
    judged = check_limits(gates, load_arm("planted", arms_dir=arms), "teacher_forcing", NOISE)
    assert judged.calibration is not None and judged.floor_path == store and judged.calibration.calibration == "cal"
    with pytest.raises(ConfigError, match="field calibration_from: names the arm itself"):
        (arms / "self.yaml").write_text("extends: cpu-smoke\ncalibration_from: self\n")
        load_arm("self", arms_dir=arms)


def test_the_power_measured_under_a_calibration_is_named_in_the_line_that_judges(store, tmp_path):
    from harness.calibrate.command import store_calibration
    from harness.refcheck.judging.check import check_limits
    from harness.refcheck.store.floor_store import record_power

    with pytest.raises(FileNotFoundError, match="no calibration of teacher_forcing"):
        record_power(store, "teacher_forcing", "logit scale 0.001")
    dirs = [tmp_path / "reports" / f"cal-r{k}" for k in (1, 2)]
    for k, d in enumerate(dirs, 1):
        write_repeat(d, store, repeat(k))
    store_calibration(ARM, "cal", dirs)
    record_power(store, "teacher_forcing", "logit scale 0.001 (missed 0.0003)")
    limits = check_limits(ReferenceCheckGates(), load_arm(ARM), "teacher_forcing", NOISE)
    assert limits.judged_by.endswith("; smallest caught: logit scale 0.001 (missed 0.0003); first calibration"), \
        limits.judged_by
    assert load_calibration(store, "teacher_forcing").repeats == 2  # the rest of the calibration is kept


@pytest.mark.parametrize("damage, why", [
    (b'{"check": "teacher_forcing", "drift_li', "not JSON"),
    (b"\xff\xfe{}", "not UTF-8 (byte 0)"),
    (b'{"check": "teacher_forcing"}', "not a calibration (field 'drift_limit')"),
])
def test_an_unreadable_calibration_fails_the_check_instead_of_falling_back_to_gates_yaml(store, tmp_path, damage, why):
    from harness.calibrate.command import store_calibration
    from harness.refcheck.judging.check import ReferenceCheck, check_limits

    dirs = [tmp_path / "reports" / f"cal-r{k}" for k in (1, 2)]
    for k, d in enumerate(dirs, 1):
        write_repeat(d, store, repeat(k))
    store_calibration(ARM, "cal", dirs)
    (store / "teacher_forcing.calibration.json").write_bytes(damage)  # the floor file beside it is intact
    limits = check_limits(ReferenceCheckGates(), load_arm(ARM), "teacher_forcing", NOISE)
    assert limits.problem and why in limits.problem and limits.judged_by.startswith("unreadable calibration: ")
    out = ReferenceCheck(limits).judge(check_fields("teacher_forcing"), repeat(7), False).fields
    assert not out.passed and out.floor.startswith("FAIL (no data: calibration ")
    assert why in out.floor and out.diverged == [out.floor]
    # a repeat of the calibration that would replace it is judged by gates.yaml (so calibrate can name real failures),
    # saying so -- never "first calibration": storing that calibration takes --trust (test_trust_review)
    mending = check_limits(ReferenceCheckGates(require_floor=True), load_arm(ARM), "teacher_forcing", NOISE,
                           CalibrationRepeat(id="cal-2", repeat=1, of=2))
    assert mending.problem is None and mending.calibration is None and not mending.require_floor
    assert why in mending.unreadable and "first calibration" not in mending.judged_by
    assert mending.judged_by.startswith("gates.yaml (calibration cal-2, repeat 1 of 2: the current calibration cannot "
                                        "be read (") and "replacing it takes `calibrate --trust" in mending.judged_by
    assert ReferenceCheck(mending).judge(check_fields("teacher_forcing"), repeat(7), False).fields.passed


def test_a_repeat_is_its_request_run_as_qualify_in_a_fresh_interpreter(capfd, tmp_path, monkeypatch):
    """The CLI's runner hands the QualifyRequest over as a value (no command line) to a spawned interpreter, which
    answers as `python -m harness qualify` would: here a refusal, exit code 2, one message."""
    from harness.admission.request import QualifyRequest
    from harness.cli import qualify_in_fresh_process

    monkeypatch.setenv("HARNESS_REPORTS_DIR", str(tmp_path))
    code = qualify_in_fresh_process(QualifyRequest(arm="nope", vllm_check=False), {"HARNESS_CALIBRATION_REPEAT": "1"})
    err = capfd.readouterr().err
    assert code == 2 and "unknown arm 'nope'" in err and err.count("error: ") == 1, err
