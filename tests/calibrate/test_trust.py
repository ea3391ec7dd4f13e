"""The chain of trust (issue 45 items 1, 2, 8): a calibration keyed without any vLLM version, recording the build it
measured; a new calibration refused when its repeats fail against the current one (stored with --trust "reason",
which every line it judges then prints); "first calibration" until a passing run of another build confirms it; every
bad input of `calibrate` refused with exit code 2, one message and nothing written; qualify's --calibration-repeat
refused on the command line; repeats kept out of the history's series."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from drift_lines import repeat
from written_repeats import ARM, NOISE, asked, write_repeat

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.thresholds import ReferenceCheckGates
from harness.records.manifest import ArmBuild, CalibrationRepeat, RunManifest, RunPair
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.store.floor_store import (
    floor_dir,
    floor_key,
    load_calibration,
    load_confirmation,
    load_floor,
    save_calibration,
)


def repeats(tmp_path: Path, store: Path, ident: str, seeds=(1, 2), **kw) -> list[Path]:
    """K repeats of teacher_forcing on disk, reports/<ident>-r<k>, repeat k drawn with seed seeds[k-1]; `shift` moves
    every position (a planted fault), the rest goes to write_repeat."""
    shift = kw.pop("shift", 0.0)
    flips = kw.pop("flips", None)
    return [write_repeat(tmp_path / "reports" / f"{ident}-r{k}", store, repeat(seed, shift=shift, flips=flips), **kw)
            for k, seed in enumerate(seeds, 1)]


def limits(build: str | None = None, repeat_of: CalibrationRepeat | None = None):
    from harness.refcheck.judging.check import check_limits

    return check_limits(ReferenceCheckGates(require_floor=True), load_arm(ARM), "teacher_forcing", NOISE, repeat_of,
                        build)


def calibrate_from(dirs: list[Path], ident: str, trust: str | None = None) -> int:
    from harness.calibrate.command import store_calibration

    return store_calibration(ARM, ident, dirs, trust=trust)


def nothing_written(tmp_path: Path, store: Path, ident: str, before: str | None) -> bool:
    """No table for `ident`, and the key's calibration is what it was (`before`: its file's text, None: none)."""
    file = store / "teacher_forcing.calibration.json"
    return not (tmp_path / "reports" / ident).exists() and (file.read_text() if file.is_file() else None) == before


# --- the key: what sets the noise, not the build under test

def test_a_calibration_judges_a_new_build_whose_reference_was_recaptured(store, tmp_path):
    """Outputs recaptured on vLLM 0.33 have another store key but the same noise key: the calibration measured on
    0.32 judges the new build's run, and names it as another build (no "own build")."""
    from harness.refcheck.judging.check import check_limits
    from harness.refcheck.store.reference_store import ReferenceKey

    meta = {"model": {"weights_sha": "w"}, "prompt_set_sha": "p", "sampling": {}, "arm_config_sha": "r"}
    old, new = ReferenceKey({**meta, "vllm_version": "0.32.0"}), ReferenceKey({**meta, "vllm_version": "0.33.0"})
    assert old.digest != new.digest and old.noise_key == new.noise_key
    keyed = floor_dir(store.parents[1], ARM, floor_key(load_arm(ARM), old.noise_key))  # where 0.32's runs judged
    assert calibrate_from(repeats(tmp_path, keyed, "cal-a"), "cal-a") == 0
    on_new = check_limits(ReferenceCheckGates(require_floor=True), load_arm(ARM), "teacher_forcing", new.noise_key,
                          build="build-b")
    assert on_new.floor_path == keyed and on_new.calibration.calibration == "cal-a"
    assert "own build" not in on_new.judged_by and on_new.judged_by.endswith("; first calibration")
    cal = load_calibration(keyed, "teacher_forcing")
    assert cal.build == {"vllm_version": "0.32.0", "build_hash": "build-a", "where": None, "package_hash": "build-a"}
    assert cal.arm == ARM and cal.arm_config_sha and cal.model and cal.reference_key == "refkey"
    assert cal.judged_against == "gates.yaml" and cal.supersedes is None and cal.first and cal.trusted is None


# --- the chain of trust

def test_a_faulty_calibration_is_refused_against_the_clean_one_and_stored_with_trust(store, tmp_path, capsys):
    """A clean first calibration (build a); then repeats of build b whose every position drifts +0.02 more (a fault
    far inside the limit: each request's max stays under it). Their own records say PASS (judged elsewhere, e.g.
    copied from another machine), yet calibrate judges their comparisons by the current calibration's floor: refused,
    naming the check and the repeats, nothing written. With --trust the same repeats are stored: the reason is in the
    calibration, in reports/<id>/calibration.json and on every line it judges."""
    assert calibrate_from(repeats(tmp_path, store, "cal-a"), "cal-a") == 0
    clean = (store / "teacher_forcing.calibration.json").read_text()
    faulty = repeats(tmp_path, store, "cal-b", seeds=(3, 4), shift=0.02, build="build-b")
    with pytest.raises(ConfigError) as refused:
        calibrate_from(faulty, "cal-b")
    message = str(refused.value)
    assert message.startswith("calibrate cpu-smoke (cal-b) refused: its repeats failed against the current "
                              "calibration cal-a: teacher_forcing in repeats 1, 2."), message
    assert "--from-runs " + " ".join(str(d) for d in faulty) + ' --trust "REASON"' in message
    assert message.endswith("Nothing was written") and nothing_written(tmp_path, store, "cal-b", clean)

    assert calibrate_from(faulty, "cal-b", trust="vendor fix 1234 moves every logprob; accepted by A. Person") == 0
    cal = load_calibration(store, "teacher_forcing")
    assert cal.calibration == "cal-b" and cal.supersedes == "cal-a" and not cal.first
    assert cal.trusted == "vendor fix 1234 moves every logprob; accepted by A. Person"
    assert cal.judged_against == "the calibration cal-a" and cal.build["build_hash"] == "build-b"
    table = json.loads((tmp_path / "reports" / "cal-b" / "calibration.json").read_text())
    assert table["trusted"] == cal.trusted and table["failed"] == {"teacher_forcing": [1, 2]}
    assert "trusted by hand: vendor fix 1234" in capsys.readouterr().out
    judged = limits(build="build-c").judged_by
    # cal-a was a first calibration no run had confirmed: cal-b, judged by it, carries that label too
    assert judged.startswith("calibrated ") and judged.endswith(
        "; trusted by hand: vendor fix 1234 moves every logprob; accepted by A. Person; first calibration (inherited "
        "from calibration cal-a, not confirmed since)"), judged


def test_a_repeat_that_failed_its_own_run_is_named_and_a_clean_rebuild_replaces_the_calibration(store, tmp_path):
    """A repeat whose record failed (as the repeat judged itself) refuses the calibration even where its comparisons
    pass; clean repeats of another build pass against the current calibration and replace it without --trust: that
    calibration is no "first" one, yet it was judged by an unconfirmed first one, whose label it carries."""
    assert calibrate_from(repeats(tmp_path, store, "cal-a"), "cal-a") == 0
    dirs = repeats(tmp_path, store, "cal-b", seeds=(5, 6), build="build-b")
    write_repeat(dirs[1].with_name("cal-c-r2"), store, repeat(6), build="build-b", passed=False, exit_code=1)
    with pytest.raises(ConfigError, match=r"failed against the current calibration cal-a: teacher_forcing in repeat "
                                          r"2\."):
        calibrate_from([dirs[0], dirs[1].with_name("cal-c-r2")], "cal-c")
    assert calibrate_from(dirs, "cal-b") == 0
    cal = load_calibration(store, "teacher_forcing")
    assert (cal.calibration, cal.supersedes, cal.first, cal.trusted) == ("cal-b", "cal-a", False, None)
    assert cal.inherited == [{"label": "first calibration", "calibration": "cal-a", "reason": None}]
    assert limits().judged_by.endswith("; first calibration (inherited from calibration cal-a, not confirmed since)")


def test_the_issues_reproduction_fails_against_a_clean_calibration_and_is_refused_as_one(store, tmp_path):
    """The issue's deterministic fault (every position +0.3 nats, 5 requests diverging where the reference's top-2 gap
    is 3.0): judged by a clean calibration it fails (limits and floor); as a calibration it is refused, --trust or
    not (its tie gap is above the ceiling), the failed repeats named beside the ceiling."""
    from harness.calibrate.trust import against_current

    assert calibrate_from(repeats(tmp_path, store, "cal-a"), "cal-a") == 0
    clean = load_calibration(store, "teacher_forcing")
    flips = {i: 3.0 for i in range(5)}
    fault = repeat(9, shift=0.3, flips=flips)
    why = against_current("teacher_forcing", fault, clean, load_floor(store, "teacher_forcing"), store)
    assert why is not None and "request(s) over its limits" in why
    dirs = repeats(tmp_path, store, "cal-f", seeds=(7, 8), shift=0.3, flips=flips, build="build-f")
    for trust in (None, "it looks fine"):
        with pytest.raises(ConfigError) as refused:
            calibrate_from(dirs, "cal-f", trust=trust)
        assert "above its ceiling" in str(refused.value) and "--trust or not" in str(refused.value)
        assert "its repeats also failed against the current calibration cal-a: teacher_forcing in repeats 1, 2" in str(
            refused.value)
    assert load_calibration(store, "teacher_forcing") == clean


def test_a_repeat_is_judged_by_the_current_calibration_not_by_gates_yaml(store, tmp_path):
    """Where the key has a calibration, a repeat of the next one is judged by it (limits and floor, like any run),
    and its line says both."""
    from check_fields import check_fields

    from harness.refcheck.judging.check import ReferenceCheck

    assert calibrate_from(repeats(tmp_path, store, "cal-a"), "cal-a") == 0
    lim = limits(repeat_of=CalibrationRepeat(id="cal-b", repeat=1, of=2))
    assert lim.calibration.calibration == "cal-a" and lim.require_floor
    assert lim.judged_by.startswith("calibrated ") and lim.judged_by.endswith(
        "; first calibration; this run: repeat 1 of 2 of calibration cal-b")
    out = ReferenceCheck(lim).judge(check_fields("teacher_forcing"), repeat(3, shift=0.02), False).fields
    assert not out.passed and "FAIL: " in out.floor


# --- "first calibration" and its confirmation

def run_manifest(build: str, exit_code: int = 0, calibration: CalibrationRepeat | None = None,
                 package: str | None = None, run_id: str | None = None) -> RunManifest:
    """A run of `build` whose vllm package files hash to `package` (default: the build's name: other files)."""
    return RunManifest(run_id=run_id or f"night-{build}", finished="2026-12-06T01:00:00", exit_code=exit_code,
                       calibration=calibration, pairs=[RunPair(candidate=ARM, reference="cpu-ref")],
                       builds={ARM: ArmBuild(vllm_version="0.33.0", build_hash=build, package_hash=package or build)})


def check_record(store: Path, passed: bool = True, arm: str = ARM, check: str = "teacher_forcing",
                 status: str = "complete") -> ReferenceCheckRecord:
    """A check judged by the calibration stored at `store` (its line, as check_limits wrote it)."""
    judged_by = load_calibration(store, check).short + "; first calibration"
    return ReferenceCheckRecord(judged_by=judged_by, run_id="night", arm=arm, suite=check, check=check,
                                reference="cpu-ref", reference_key="refkey", passed=passed, detail="d", requests=40,
                                exact_matches=40, first_divergence_min=None, max_drift=0.1, nonfinite=0,
                                drift_limit=0.4, floor_path=str(store), status=status)


def test_first_calibration_stays_so_until_a_passing_run_of_another_build_confirms_it(store, tmp_path):
    """Each way a run fails to confirm is stated in one sentence (qualify prints it); a passing run of other vllm
    package files that judged every calibrated check confirms, once, and the label goes."""
    from harness.calibrate.trust import confirm_calibrations

    assert calibrate_from(repeats(tmp_path, store, "cal-a"), "cal-a") == 0
    cal = load_calibration(store, "teacher_forcing")
    assert limits(build="build-a").judged_by.endswith("; first calibration; run on the calibration's own build")
    rec = [check_record(store)]
    no = "calibration cal-a of cpu-smoke not confirmed by run night-build-{}: {}"
    assert confirm_calibrations(run_manifest("build-a"), rec) == [
        no.format("a", "the run is of the calibration's own build")]
    assert confirm_calibrations(run_manifest("build-b", exit_code=1), rec) == [
        no.format("b", "the run did not pass (exit code 1)")]
    assert confirm_calibrations(run_manifest("build-b"), [check_record(store, passed=False)]) == [
        no.format("b", "teacher_forcing did not pass complete")]
    assert confirm_calibrations(run_manifest("build-b"), [check_record(store, status="aborted")]) == [
        no.format("b", "teacher_forcing did not pass complete")]
    assert confirm_calibrations(run_manifest("build-b", calibration=CalibrationRepeat(id="x", repeat=1, of=2)),
                                rec) == []  # a calibration repeat confirms nothing
    assert confirm_calibrations(run_manifest("build-b"), [check_record(store, arm="cpu-smoke-planted")]) == [
        no.format("b", "teacher_forcing was judged for cpu-smoke-planted, not the calibration's arm cpu-smoke (a "
                       "planted-fault variant confirms nothing)")]
    assert load_confirmation(store, cal) is None and "first calibration" in limits(build="build-b").judged_by

    lines = confirm_calibrations(run_manifest("build-b"), rec)
    assert lines == ["calibration cal-a of cpu-smoke (teacher_forcing) confirmed: run night-build-b of another build "
                     "(vllm package build-b, vLLM 0.33.0) passed every check calibrated for the key (teacher_forcing), "
                     "each judged by its calibration"]
    assert load_confirmation(store, cal)["run"] == "night-build-b"
    judged = limits(build="build-b").judged_by
    assert "first calibration" not in judged and "own build" not in judged
    assert confirm_calibrations(run_manifest("build-c"), rec) == []  # once: nothing left to confirm


def test_a_transformers_bump_under_the_same_vllm_files_does_not_confirm(store, tmp_path):
    """The build hash folds the stack's versions (a transformers or torch bump is another build), but a confirmation
    asks for other vLLM code: the vllm package's own hash. Planted: build hash changed, package hash the same."""
    from harness.calibrate.trust import confirm_calibrations

    assert calibrate_from(repeats(tmp_path, store, "cal-a"), "cal-a") == 0
    lines = confirm_calibrations(run_manifest("build-a-transformers-5", package="build-a"), [check_record(store)])
    assert lines == ["calibration cal-a of cpu-smoke not confirmed by run night-build-a-transformers-5: the run's vllm "
                     "package files are the calibrated build's (build-a): only the libraries beside it changed, which "
                     "is no other vLLM"]
    assert load_confirmation(store, load_calibration(store, "teacher_forcing")) is None
    # a record without the package's own hash, on either side, cannot confirm, and says so
    old = ArmBuild(vllm_version="0.33.0", build_hash="build-b")
    assert "the run recorded no vllm package hash of cpu-smoke" in confirm_calibrations(
        run_manifest("build-b").model_copy(update={"builds": {ARM: old}}), [check_record(store)])[0]
    cal = load_calibration(store, "teacher_forcing")
    save_calibration(store, replace(cal, build={"vllm_version": "0.32.0", "build_hash": "build-a"}),
                     load_floor(store, "teacher_forcing").comparisons, {})
    assert "the calibration recorded no vllm package hash of the build it measured" in confirm_calibrations(
        run_manifest("build-b"), [check_record(store)])[0]


def test_a_run_that_skipped_a_calibrated_family_does_not_confirm(store, tmp_path):
    """Every check calibrated for the key must run and pass in the confirming run: kv_pressure calibrated beside
    teacher_forcing and skipped (no record) leaves the calibration unconfirmed, naming it; judged too, it confirms."""
    from harness.calibrate.trust import confirm_calibrations

    assert calibrate_from(repeats(tmp_path, store, "cal-a"), "cal-a") == 0
    cal = load_calibration(store, "teacher_forcing")
    save_calibration(store, replace(cal, check="kv_pressure"), load_floor(store, "teacher_forcing").comparisons, {})
    lines = confirm_calibrations(run_manifest("build-b"), [check_record(store)])
    assert lines == ["calibration cal-a of cpu-smoke not confirmed by run night-build-b: kv_pressure is calibrated for "
                     "this key and was not judged in this run (skipped or not run)"]
    lines = confirm_calibrations(run_manifest("build-b"), [check_record(store), check_record(store, check="kv_pressure")])
    assert len(lines) == 2 and all(" confirmed: run night-build-b" in line for line in lines), lines


def test_trust_is_not_laundered_by_a_clean_calibration_and_a_confirmation_clears_it(store, tmp_path):
    """The issue's laundering: a --trust'ed calibration, then a clean one of the same build judged by it (it passes,
    so it needs no --trust). The clean one carries "trusted by hand" (reason and id) and the first calibration's label
    it inherited; a confirming run clears both, and a calibration judged by a confirmed one inherits nothing."""
    from harness.calibrate.trust import confirm_calibrations

    dirs = repeats(tmp_path, store, "cal-a", passed=False, exit_code=1)
    assert calibrate_from(dirs, "cal-a", trust="first GPU build; seed limits fail bf16") == 0
    assert calibrate_from(repeats(tmp_path, store, "cal-b", seeds=(3, 4)), "cal-b") == 0
    cal = load_calibration(store, "teacher_forcing")
    assert cal.trusted is None and not cal.first and cal.calibration == "cal-b"
    judged = limits(build="build-c").judged_by
    assert judged.endswith("; first calibration (inherited from calibration cal-a, not confirmed since); trusted by "
                           "hand: first GPU build; seed limits fail bf16 (inherited from calibration cal-a, not "
                           "confirmed since)"), judged
    assert calibrate_from(repeats(tmp_path, store, "cal-c", seeds=(5, 6)), "cal-c") == 0  # and again: still carried
    assert "trusted by hand: first GPU build" in limits(build="build-c").judged_by

    assert len(confirm_calibrations(run_manifest("build-c"), [check_record(store)])) == 1
    assert "trusted by hand" not in limits(build="build-c").judged_by
    assert "first calibration" not in limits(build="build-c").judged_by
    assert calibrate_from(repeats(tmp_path, store, "cal-d", seeds=(7, 8)), "cal-d") == 0
    assert load_calibration(store, "teacher_forcing").inherited is None
    judged = limits(build="build-c").judged_by
    assert "inherited" not in judged and "trusted" not in judged and "first calibration" not in judged, judged


# --- calibrate's bad input: exit code 2, one message, nothing written

def cli(*argv: str) -> int:
    from harness.cli import main

    return main(["calibrate", "--arm", ARM, *argv])


@pytest.mark.parametrize("case, message", [
    ("interrupted", "cal-x-r1 was interrupted (run.json has no end time"),
    ("signal", "cal-x-r1 was interrupted (the run was interrupted (exit code 143, SIGTERM)"),
    ("refused", "cal-x-r1 was refused before its checks ran (exit code 2)"),
    ("aborted", "teacher_forcing in cal-x-r1 stopped early"),
    ("one run", "1 run(s) given; arm cpu-smoke calibrates from at least 2 distinct finished repeats of one build"),
    ("same run twice", "are the same run: a calibration's K repeats are K distinct runs"),
    ("two builds", "the repeats ran different builds of cpu-smoke (cal-x-r1: build-a (vLLM 0.32.0); cal-x-r2: build-b"),
    ("two commits", "the repeats ran different harness commits (c0ffee, d00d)"),
    ("no build", "cal-x-r2 recorded no vLLM build of cpu-smoke"),
    ("newer run.json", "run.json is of a newer format (schema_version 9; this harness reads run.json version 1"),
    ("newer record", "results.jsonl:1 is a record of a newer format (schema_version 9; this harness reads version"),
    ("another arm", "cal-x-r2 is a run of cpu-ref, not of cpu-smoke"),
])
@pytest.mark.parametrize("trust", [None, "trusted anyway"])
def test_from_runs_refuses_what_cannot_be_a_calibration_whatever_trust_says(store, tmp_path, capsys, case, message,
                                                                           trust):
    dirs = repeats(tmp_path, store, "cal-x", exit_code=143 if case == "signal" else 2 if case == "refused" else 0,
                   finished=None if case == "interrupted" else "2026-12-05T08:00:00",
                   status="aborted" if case == "aborted" else "complete")
    run = dirs[1]
    manifest = json.loads((run / "run.json").read_text())
    if case == "two builds":
        manifest["builds"][ARM]["build_hash"] = "build-b"
    if case == "two commits":
        manifest["git_commit"] = "d00d"
    if case == "no build":
        manifest.pop("builds")
    if case == "newer run.json":
        manifest["schema_version"] = 9
    if case == "another arm":
        manifest["pairs"] = [{"candidate": "cpu-ref"}]
    (run / "run.json").write_text(json.dumps(manifest))
    if case == "newer record":
        lines = (run / "results.jsonl").read_text().splitlines()
        (run / "results.jsonl").write_text("\n".join([json.dumps({**json.loads(lines[0]), "schema_version": 9}),
                                                      *lines[1:]]) + "\n")
    given = {"one run": dirs[:1], "same run twice": [dirs[0], dirs[0]]}.get(case, dirs)
    code = cli("--from-runs", *map(str, given), "--id", "cal-x", *(["--trust", trust] if trust else []))
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("error: ") == 1, err
    assert nothing_written(tmp_path, store, "cal-x", None) and not list(store.parent.glob("*/*.calibration.json"))


def test_a_failing_first_calibration_is_refused_and_stored_only_with_trust(store, tmp_path, capsys):
    """An arm's first calibration is judged by gates.yaml: repeats that failed there (exit code 1) are refused too."""
    dirs = repeats(tmp_path, store, "cal-x", passed=False, exit_code=1)
    assert cli("--from-runs", *map(str, dirs), "--id", "cal-x") == 2
    err = capsys.readouterr().err
    assert ("refused: its repeats failed as the arm's first calibration: teacher_forcing in repeats 1, 2 (judged by "
            "gates.yaml's limits: d); no independent anchor could be measured (float32 teacher forcing: not measured "
            "(the reference outputs ") in err and nothing_written(tmp_path, store, "cal-x", None)
    assert cli("--from-runs", *map(str, dirs), "--id", "cal-x", "--trust", "first build, failures are tie flips") == 0
    cal = load_calibration(store, "teacher_forcing")
    assert cal.first and cal.trusted == "first build, failures are tie flips"
    assert limits().judged_by.endswith("; first calibration; trusted by hand: first build, failures are tie flips")


@pytest.mark.parametrize("argv, message", [
    (["--id", "../../x"], "calibrate --id '../../x': a calibration's name is one directory name under reports/"),
    (["--id", "/tmp/x"], "calibrate --id '/tmp/x': a calibration's name is one directory name"),
    (["--id", "a/b"], "calibrate --id 'a/b': a calibration's name"),
    (["--id", ".."], "calibrate --id '..': a calibration's name"),
    (["--suites", "teacher_forcing,teacher_forcin"], "'teacher_forcin' is not a suite with checks to calibrate; "
                                                     "calibrate takes graph_replay, long_context, "),
    (["--suites", "gsm8k"], "'gsm8k' is not a suite with checks to calibrate"),
    (["--repeats", "2", "--set", "reference=null"], "calibrate --arm cpu-smoke: the arm names no reference arm"),
    (["--trust", " "], "calibrate --trust '': give the reason"),
])
def test_calibrate_refuses_bad_input_before_any_repeat_runs(store, tmp_path, capsys, monkeypatch, argv, message):
    import harness.cli as cli_module

    monkeypatch.setattr(cli_module, "qualify_in_fresh_process", lambda *a: pytest.fail("a repeat ran"))
    assert cli(*argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("error: ") == 1, err
    assert not (tmp_path / "reports").exists() and not (tmp_path / "x").exists()


def test_k_below_the_arms_minimum_is_refused(store, monkeypatch):
    """gpu arms calibrate with K >= 5 (gates.yaml calibration.min_repeats); cpu-smoke's test gates ask 2, so ask 3."""
    import harness.qualify.calibrating as calibrating
    from harness.qualify.calibrating import calibrate

    real = calibrating.load_gates
    monkeypatch.setattr(calibrating, "load_gates", lambda arm: real(arm).model_copy(update={
        "calibration": real(arm).calibration.model_copy(update={"min_repeats": 3})}))
    with pytest.raises(ConfigError, match=r"calibrate --repeats 2: arm cpu-smoke calibrates with at least 3 repeats "
                                          r"\(gates.yaml calibration.min_repeats\); give --repeats 3 or more"):
        calibrate(asked(2, None, "cal-k"), lambda request, env: pytest.fail("a repeat ran"))


# --- no bypass

def test_calibration_repeat_typed_on_qualifys_command_line_is_refused(tmp_path, capsys, monkeypatch):
    from harness.cli import main

    monkeypatch.setenv("HARNESS_REPORTS_DIR", str(tmp_path))
    assert main(["qualify", "--arm", ARM, "--run-dir", str(tmp_path / "run"), "--calibration-repeat", "cal:1/3"]) == 2
    err = capsys.readouterr().err
    assert ("qualify --calibration-repeat cal:1/3: refused: a calibration repeat is made only by `python -m harness "
            "calibrate --arm ARM`") in err
    assert not (tmp_path / "run").exists()
    assert "--calibration-repeat" not in main.__globals__["build_parser"]().format_help()


def test_the_repeat_marker_reads_id_k_of_n(monkeypatch):
    from harness.admission.record import calibration_repeat

    assert calibration_repeat("cal-x:2/5") == CalibrationRepeat(id="cal-x", repeat=2, of=5)
    with pytest.raises(ConfigError, match="calibration repeat 'cal-x:6/5': expected ID:K/N"):
        calibration_repeat("cal-x:6/5")


# --- repeats are no nights

def test_calibration_repeats_stay_out_of_the_historys_series_and_nightly_check(tmp_path, capsys, monkeypatch):
    from nights import make_nights

    from harness.history import store as history
    from harness.history.command import append_run, cmd_check
    from harness.history.trends import series

    real = Path(__file__).parents[1] / "fixtures" / "stored_runs" / "h200-2026-12-02c-control"
    nights = make_nights(real, tmp_path / "runs", 4)
    repeat_run = nights[2]
    manifest = json.loads((repeat_run / "run.json").read_text())
    (repeat_run / "run.json").write_text(json.dumps({**manifest, "calibration": {"id": "cal", "repeat": 1, "of": 5}}))
    db_path = tmp_path / "h.sqlite"
    for night in nights:
        append_run(night, db_path)
    with history.connect(db_path) as db:
        s = series(db, "gpu-mla-120k", "long_prefix.c1.tpot_p50_ms")
        stored = [r.run_id for r in history.runs(db)]
    assert repeat_run.name in stored and repeat_run.name not in s.runs and len(s.runs) == 3
    monkeypatch.setenv("HARNESS_HISTORY", str(db_path))
    assert cmd_check(type("Args", (), {"run": repeat_run.name})()) == 1
    assert "is a calibration repeat (cal:1/5): no nightly run" in capsys.readouterr().out
