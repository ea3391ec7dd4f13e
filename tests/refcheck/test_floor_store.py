"""Known-good floors: a key that changes with anything that changes the drift, a store round trip, the paired
judgement against a floor (clean repeat passes, a planted shift below the fixed limit fails), and accept-floor
refusing a failed run."""

import random
from pathlib import Path

import pytest
from check_fields import check_fields

from harness.cli import main
from harness.config.arms import load_arm
from harness.judge.drift_floor import judge_against_floor
from harness.records.manifest import RunManifest, write_manifest
from harness.records.schema import ReferenceCheckRecord, TeacherForcedComparison
from harness.refcheck.store.floor_store import floor_dir, floor_key, load_floor, save_floor


def comparisons(shift: float = 0.0, seed: int = 0, n: int = 40, positions: int = 32) -> list[TeacherForcedComparison]:
    """Teacher-forced lines like a clean bf16 pair (|delta| ~ 5e-3), every position moved by `shift`."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        deltas = [abs(rng.gauss(0, 0.005)) + shift for _ in range(positions)]
        out.append(TeacherForcedComparison(request=f"r{i}", prompt_tokens=64, exact=True, first_divergence=None,
                                           max_drift=max(deltas), reference_tokens=positions, candidate_tokens=positions, finite=True,
                                           deltas=deltas, mean_drift=sum(deltas) / positions))
    return out


def test_the_key_changes_with_the_candidate_config_and_the_reference_noise_key_not_the_vllm_version():
    from harness.refcheck.store.reference_store import ReferenceKey

    arm = load_arm("cpu-smoke")
    meta = {"model": {"weights_sha": "w"}, "prompt_set_sha": "p", "sampling": {"max_tokens": 8}, "arm_config_sha": "r"}
    old, new = ReferenceKey({**meta, "vllm_version": "0.32.0"}), ReferenceKey({**meta, "vllm_version": "0.33.0"})
    assert old.digest != new.digest and old.noise_key == new.noise_key  # outputs recaptured on a new build
    base = floor_key(arm, old.noise_key)
    assert base == floor_key(load_arm("cpu-smoke"), new.noise_key)
    assert base != floor_key(load_arm("cpu-smoke", ["server.max_num_batched_tokens=1024"]), old.noise_key)
    for field in meta:  # model, prompts, sampling, the reference's config: each sets the noise
        assert base != floor_key(arm, ReferenceKey({**meta, field: "other", "vllm_version": "0.32.0"}).noise_key)


def test_store_round_trip_and_missing_floor(tmp_path):
    path = floor_dir(tmp_path, "gpu-dcp2", "abc")
    assert load_floor(path, "teacher_forcing") is None
    src = tmp_path / "tf.jsonl"
    src.write_text("".join(c.model_dump_json() + "\n" for c in comparisons()) + '{"truncated": \n')
    save_floor(path, "teacher_forcing", src, {"run": "night-1"})
    floor = load_floor(path, "teacher_forcing")
    assert len(floor.comparisons) == 40 and floor.source["run"] == "night-1" and "night-1" in floor.name
    assert isinstance(floor.comparisons[0], TeacherForcedComparison) and load_floor(path, "graph_replay") is None
    save_floor(path, "teacher_forcing", src, {"run": "night-2"})  # a later accepted run replaces it
    assert load_floor(path, "teacher_forcing").source["run"] == "night-2"


def test_a_clean_repeat_passes_and_states_what_it_could_detect():
    floor = comparisons(seed=0)
    repeat = comparisons(seed=1)
    j = judge_against_floor(repeat, floor, "the accepted run n1")
    assert j.passed, j.sentence
    assert j.sentence.startswith("PASS: Wilcoxon") and "PASS: sign test" in j.sentence
    assert j.detectable.startswith("smallest detectable mean shift of per-request mean |delta|: ")


def test_a_shift_far_below_the_fixed_limit_fails_against_the_floor():
    floor, shifted = comparisons(seed=0), comparisons(shift=0.002, seed=1)
    assert max(c.max_drift for c in shifted) < 0.05  # the fixed limit (0.25 on the GPU pair) would pass it
    j = judge_against_floor(shifted, floor, "the accepted run n1")
    assert not j.passed and "FAIL: Wilcoxon" in j.sentence


def test_a_generation_check_pairs_only_the_positions_both_runs_reached():
    from harness.judge.drift_floor import common_means

    floor = comparisons(seed=0)
    cand = [c.model_copy(update={"deltas": c.deltas[:5]}) for c in comparisons(seed=0)]  # diverged at token 5
    mine, theirs = common_means(cand, floor)
    assert mine == theirs and len(mine) == 40  # the same first five positions on both sides
    assert judge_against_floor(cand, floor, "n1").passed


def test_too_few_pairs_on_both_tests_fail_rather_than_pass():
    j = judge_against_floor(comparisons(n=4, positions=2), comparisons(n=4, positions=2, seed=3), "n1")
    assert not j.passed and j.sentence.count("FAIL: not enough data") == 2


def test_a_check_with_few_requests_rests_on_its_positions():
    # prefix_reuse's shape: 7 requests, 64 decode positions each. On the H200 pair a clean repeat of it read FAIL
    # because the per-request test had 7 pairs (< 10); the per-position test (448 pairs) decides instead.
    floor = comparisons(n=7, positions=64)
    clean = judge_against_floor(comparisons(n=7, positions=64, seed=1), floor, "n1")
    assert clean.passed, clean.sentence
    assert clean.sentence.startswith("not judged: the Wilcoxon") and "PASS: sign test" in clean.sentence
    assert clean.detectable.startswith("smallest detectable mean shift of per-position |delta|: ")
    shifted = judge_against_floor(comparisons(shift=0.002, n=7, positions=64, seed=1), floor, "n1")
    assert not shifted.passed and "FAIL: sign test" in shifted.sentence


def finished(run, exit_code=0):
    """run.json of a qualify that ran to its end."""
    run.mkdir(parents=True, exist_ok=True)
    write_manifest(run, RunManifest(run_id=run.name, started="2026-12-03T14:47:44+0000",
                                    finished="2026-12-03T14:52:00+0000", exit_code=exit_code))


def write_run(run, passed: bool, tmp_path, status="complete"):
    finished(run, 0 if passed else 1)
    tf = run / "cpu-smoke" / "tf.jsonl"
    tf.parent.mkdir()
    tf.write_text("".join(c.model_dump_json() + "\n" for c in comparisons()))
    rec = ReferenceCheckRecord(run_id=run.name, arm="cpu-smoke", suite="teacher_forcing", check="teacher_forcing",
                               reference="cpu-ref", reference_key="k", passed=passed, detail="d", requests=40,
                               exact_matches=40, first_divergence_min=None, max_drift=0.01, nonfinite=0,
                               drift_limit=0.25, status=status, comparisons_path=str(tf),
                               floor_path=str(tmp_path / "refs" / "floors" / "cpu-smoke-k"))
    (run / "results.jsonl").write_text(rec.model_dump_json() + "\n")
    return rec


@pytest.fixture(autouse=True)
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_REFERENCE_DIR", str(tmp_path / "refs"))


def test_accept_floor_stores_a_passing_run_and_refuses_a_failed_one(tmp_path, capsys):
    rec = write_run(tmp_path / "good", True, tmp_path)
    assert main(["accept-floor", "--run", str(tmp_path / "good")]) == 0
    floor = load_floor(tmp_path / "refs" / "floors" / "cpu-smoke-k", "teacher_forcing")
    assert floor is not None and floor.source["run"] == "good" and len(floor.comparisons) == rec.requests
    write_run(tmp_path / "bad", False, tmp_path)
    assert main(["accept-floor", "--run", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "did not all pass complete" in err and "cannot be the known-good floor" in err
    assert load_floor(tmp_path / "refs" / "floors" / "cpu-smoke-k", "teacher_forcing").source["run"] == "good"
    assert main(["accept-floor", "--run", str(tmp_path / "good"), "--arm", "other"]) == 2
    assert "needs the reference checks of exactly one arm ('other'); found: none" in capsys.readouterr().err


def test_accept_floor_does_not_replace_a_calibrations_floor(tmp_path, capsys):
    """A calibrated key's floor is sealed with its calibration (issue 55 item 5): accepting a run's floor there would
    leave the check judged by nothing (the calibration reads as edited). Refused, naming the calibration, floor kept."""
    key = tmp_path / "refs" / "floors" / "cpu-smoke-k"
    key.mkdir(parents=True)
    (key / "teacher_forcing.calibration.json").write_text("{}")
    (key / "teacher_forcing.jsonl").write_text("the calibration's floor\n")
    write_run(tmp_path / "good", True, tmp_path)
    assert main(["accept-floor", "--run", str(tmp_path / "good")]) == 2
    err = capsys.readouterr().err
    assert f"accept-floor: {key / 'teacher_forcing.calibration.json'} calibrated the key" in err
    assert "calibrate --arm cpu-smoke" in err and err.count("error: ") == 1
    assert (key / "teacher_forcing.jsonl").read_text() == "the calibration's floor\n"


def limits_for(arm, key: str, check: str = "teacher_forcing", require_floor: bool = False):
    from harness.config.thresholds import ReferenceCheckGates
    from harness.refcheck.judging.check import check_limits

    return check_limits(ReferenceCheckGates(require_floor=require_floor), arm, check, key)


def test_the_floor_reads_fail_no_data_when_required_and_missing_or_when_aborted(tmp_path, monkeypatch):
    from harness.refcheck.judging.check import ReferenceCheck
    from harness.refcheck.judging.comparisons import BatchComparisons

    def judged(fields, run: BatchComparisons, limits):
        return ReferenceCheck(limits).judge(fields, run.comparisons, bool(run.aborted)).fields

    monkeypatch.setenv("HARNESS_REFERENCE_DIR", str(tmp_path / "refs"))
    arm = load_arm("cpu-smoke")
    fields = check_fields("teacher_forcing")  # against cpu-ref's stored outputs
    clean = BatchComparisons(comparisons(seed=1))
    optional = judged(fields, clean, limits_for(arm, "refkey"))
    assert optional.passed and optional.floor.startswith(
        "not calibrated: no calibration or accepted floor for teacher_forcing of cpu-smoke vs cpu-ref")
    assert "python -m harness calibrate --arm cpu-smoke" in optional.floor
    assert optional.judged_by == "gates.yaml, not calibrated: limit 0.01, tie gap 0"
    required = judged(fields, clean, limits_for(arm, "refkey", require_floor=True))
    assert not required.passed and required.floor.startswith("FAIL (no data: not calibrated")
    assert required.diverged == [required.floor]

    src = tmp_path / "tf.jsonl"
    src.write_text("".join(c.model_dump_json() + "\n" for c in comparisons(seed=0)))
    save_floor(Path(optional.floor_path), "teacher_forcing", src, {"run": "n1"})
    assert judged(fields, clean, limits_for(arm, "refkey", require_floor=True)).passed
    aborted = judged(fields, BatchComparisons(comparisons(seed=1)[:3], "round 1: died"),
                     limits_for(arm, "refkey", require_floor=True))
    assert not aborted.passed and aborted.floor.startswith("FAIL (no data: the check was aborted")


def test_a_request_compared_twice_pairs_by_its_group():
    # long_prefix_outputs compares a request's free generation (group "c1") and scores it teacher-forced ("c1
    # forced") under one request id: both pair with the floor's, neither overwrites the other.
    def both(shift: float, seed: int) -> list[TeacherForcedComparison]:
        free = [c.model_copy(update={"group": "c1"}) for c in comparisons(n=12, seed=seed)]
        forced = [c.model_copy(update={"group": "c1 forced"}) for c in comparisons(shift=shift, n=12, seed=seed + 7)]
        return [*free, *forced]

    clean = judge_against_floor(both(0.0, 1), both(0.0, 0), "n1")
    assert clean.passed and "24 pairs" in clean.sentence, clean.sentence
    shifted = judge_against_floor(both(0.002, 1), both(0.0, 0), "n1")  # only the forced half moved
    assert not shifted.passed, shifted.sentence


def test_accept_floor_stores_the_floored_checks_beside_a_capacity_check_without_one(tmp_path, capsys):
    write_run(tmp_path / "good", True, tmp_path)
    capacity = ReferenceCheckRecord(run_id="good", arm="cpu-smoke", suite="capacity", check="capacity_outputs_c1",
                                    reference="cpu-ref", reference_key="run cpu-ref", passed=True, detail="d",
                                    requests=2, exact_matches=2, first_divergence_min=None, max_drift=0.0,
                                    nonfinite=0, drift_limit=0.25)
    with (tmp_path / "good" / "results.jsonl").open("a") as f:
        f.write(capacity.model_dump_json() + "\n")
    assert main(["accept-floor", "--run", str(tmp_path / "good")]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.count("accepted from good") == 1
    assert load_floor(tmp_path / "refs" / "floors" / "cpu-smoke-k", "teacher_forcing") is not None
    capacity.passed = False  # a failed check without a floor still refuses the run
    finished(tmp_path / "bad", 1)
    (tmp_path / "bad" / "results.jsonl").write_text(
        (tmp_path / "good" / "results.jsonl").read_text().splitlines()[0] + "\n" + capacity.model_dump_json() + "\n")
    assert main(["accept-floor", "--run", str(tmp_path / "bad")]) == 2
    assert "capacity_outputs_c1: d" in capsys.readouterr().err


def test_long_prefix_outputs_floor_stores_and_judges_generated_and_forced_lines(tmp_path, monkeypatch):
    from harness.refcheck.judging.check import ReferenceCheck

    monkeypatch.setenv("HARNESS_REFERENCE_DIR", str(tmp_path / "refs"))
    arm = load_arm("cpu-smoke")
    fields = check_fields("long_prefix_outputs")

    def lines(shift: float, seed: int) -> list:
        free = [c.model_copy(update={"group": "c1"}) for c in comparisons(shift=shift, n=12, seed=seed)]
        return [*free, *(c.model_copy(update={"group": "c1 forced"}) for c in comparisons(shift=shift, n=4, seed=seed))]

    key = "long_prefix samples of cpu-ref in this run (prompts abc), reference config 123"
    check = "long_prefix_outputs"
    first = ReferenceCheck(limits_for(arm, key, check)).judge(fields, lines(0.0, 0), False).fields
    assert first.floor.startswith("not calibrated: no calibration or accepted floor for long_prefix_outputs of "
                                     "cpu-smoke vs cpu-ref")
    src = tmp_path / "lp.jsonl"
    src.write_text("".join(c.model_dump_json() + "\n" for c in lines(0.0, 0)))
    save_floor(Path(first.floor_path), "long_prefix_outputs", src, {"run": "n1"})
    assert len(load_floor(Path(first.floor_path), "long_prefix_outputs").comparisons) == 16
    clean = ReferenceCheck(limits_for(arm, key, check, True)).judge(fields, lines(0.0, 1), False).fields
    assert clean.passed and clean.floor.startswith("PASS"), clean.floor
    shifted = ReferenceCheck(limits_for(arm, key, check, True)).judge(fields, lines(0.003, 1), False).fields
    assert not shifted.passed and "FAIL: sign test" in shifted.floor, shifted.floor
    other = ReferenceCheck(limits_for(arm, key.replace("123", "456"), check, True)).judge(fields, lines(0.0, 1), False).fields
    assert other.floor.startswith("FAIL (no data: not calibrated"), other.floor  # another reference config


def test_accept_floor_of_a_run_copied_from_another_machine_stores_in_this_store(tmp_path, capsys):
    # Recorded on a CI machine: its store's absolute path and its run directory's path, neither of which is here.
    write_run(tmp_path / "ci", True, tmp_path)
    rows = (tmp_path / "ci" / "results.jsonl").read_text()
    moved = rows.replace(str(tmp_path / "refs"), "/buildkite/refs").replace(str(tmp_path / "ci"), "/buildkite/run")
    (tmp_path / "ci" / "results.jsonl").write_text(moved)
    assert main(["accept-floor", "--run", str(tmp_path / "ci")]) == 0, capsys.readouterr().err
    floor = load_floor(tmp_path / "refs" / "floors" / "cpu-smoke-k", "teacher_forcing")
    assert floor is not None and len(floor.comparisons) == 40
    assert not Path("/buildkite").exists()


def test_accept_floor_names_a_missing_comparisons_file(tmp_path, capsys):
    write_run(tmp_path / "good", True, tmp_path)
    (tmp_path / "good" / "cpu-smoke" / "tf.jsonl").unlink()
    assert main(["accept-floor", "--run", str(tmp_path / "good")]) == 2
    err = capsys.readouterr().err
    assert "the teacher_forcing comparisons file" in err and "is missing" in err and "Traceback" not in err


def test_accept_floor_refuses_an_interrupted_run_or_one_without_run_json(tmp_path, capsys):
    # On one H200 (2026-12-03) a control killed at its deadline (exit 143) after prefix_reuse passed, before
    # teacher_forcing ran, was accepted: its floor stood for a run whose other checks never ran.
    write_run(tmp_path / "cut", True, tmp_path)
    finished(tmp_path / "cut", 143)
    assert main(["accept-floor", "--run", str(tmp_path / "cut")]) == 2
    err = capsys.readouterr().err
    assert "cut is not a finished run (the run was interrupted (exit code 143, SIGTERM)" in err
    (tmp_path / "cut" / "run.json").unlink()
    assert main(["accept-floor", "--run", str(tmp_path / "cut")]) == 2
    assert "is not a finished run" in capsys.readouterr().err
    assert load_floor(tmp_path / "refs" / "floors" / "cpu-smoke-k", "teacher_forcing") is None
