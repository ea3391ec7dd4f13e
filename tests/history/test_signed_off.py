"""The last signed-off build (harness/admission/baseline_build.py over harness/history/signed_off.py): the newest
finished, passed qualify run of the arm as a candidate whose directory holds its stored outputs; a failed run, a
calibration repeat, another arm's run or one without outputs never is; none at all is one message (exit 2)."""

from __future__ import annotations

import json

import pytest

from harness.admission import baseline_build as bb
from harness.admission.baseline_build import pin_problems
from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.history.command import append_run
from harness.history.signed_off import passed_runs_of
from harness.history.store import connect
from harness.measure.generation import Sampling
from harness.refcheck.judging import build_outputs as bo
from harness.refcheck.store.reference_store import model_identity


@pytest.fixture(scope="module")
def arm():
    return load_arm("cpu-smoke")


def run(root, name, arm, exit_code=0, finished="2026-12-07T10:00:00+0000", outputs=True, candidate="cpu-smoke",
        calibration=None, identity=None):
    """A finished run directory as qualify leaves it, appended to the history at root/history.sqlite."""
    d = root / name
    d.mkdir()
    manifest = {"schema_version": 1, "run_id": name, "started": finished, "finished": finished,
                "exit_code": exit_code, "pairs": [{"candidate": candidate, "reference": "cpu-ref"}],
                "arms": {candidate: {}, "cpu-ref": {}},
                "builds": {candidate: {"vllm_version": "0.32.0", "build_hash": f"build-{name}"}}}
    if calibration:
        manifest["calibration"] = calibration
    (d / "run.json").write_text(json.dumps(manifest))
    if outputs:
        meta = bo.outputs_meta(arm, identity or model_identity(arm), "p", Sampling(24, 5), {})
        bo.save_outputs(bo.outputs_path(d, candidate), {**meta, "arm": candidate}, [], {})
    append_run(d, root / "history.sqlite")
    return d


@pytest.fixture
def history(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_HISTORY", str(tmp_path / "history.sqlite"))
    return tmp_path


def test_the_last_signed_off_run_is_the_newest_passed_one_with_outputs(history, arm):
    old = run(history, "old", arm, finished="2026-12-01T10:00:00+0000")
    run(history, "failed", arm, exit_code=1, finished="2026-12-05T10:00:00+0000")
    run(history, "no-outputs", arm, finished="2026-12-06T10:00:00+0000", outputs=False)
    run(history, "repeat", arm, finished="2026-12-06T11:00:00+0000",
        calibration={"id": "c", "repeat": 1, "of": 2})
    run(history, "other-arm", arm, finished="2026-12-06T12:00:00+0000", candidate="cpu-spec")
    with connect(history / "history.sqlite") as db:
        assert [p.name for p in passed_runs_of(db, "cpu-smoke")] == ["no-outputs", "old"]
    found = bb.resolve_baseline_build(bb.LAST, arm)
    assert (found.run_id, found.run_dir, found.arm, found.build_hash) == ("old", str(old.resolve()), "cpu-smoke",
                                                                          "build-old")
    newer = run(history, "newer", arm, finished="2026-12-07T10:00:00+0000")
    assert bb.resolve_baseline_build(bb.LAST, arm).run_dir == str(newer.resolve())


def test_no_signed_off_run_is_one_message(history, arm):
    run(history, "failed", arm, exit_code=1)
    with pytest.raises(ConfigError) as exc:
        bb.resolve_baseline_build(bb.LAST, arm)
    assert exc.value.exit_code == 2
    assert "no signed-off build of cpu-smoke in HARNESS_HISTORY=" in str(exc.value)
    assert "(0 passed runs, none with its outputs stored)" in str(exc.value)


def test_a_named_run_must_sign_this_arm_off(history, arm):
    failed = run(history, "failed", arm, exit_code=1)
    with pytest.raises(ConfigError, match="its verdict was not PASS"):
        bb.resolve_baseline_build(str(failed), arm)
    other_model = run(history, "other-model", arm, identity={"weights_sha": "0"})
    with pytest.raises(ConfigError, match="no baseline for arm cpu-smoke: they are of another model"):
        bb.resolve_baseline_build(str(other_model), arm)
    good = run(history, "good", arm)
    assert bb.resolve_baseline_build(str(good), arm).build_hash == "build-good"


def test_the_build_pin_must_exist(history, arm, tmp_path):
    pinned = arm.model_copy(update={"server": arm.server.model_copy(update={"env": {"PYTHONPATH": "/no/such"}})})
    with pytest.raises(ConfigError, match=r"field server.env.PYTHONPATH: /no/such is no directory"):
        bb.resolve_baseline_build(bb.LAST, pinned)
    assert pin_problems(arm.model_copy(update={"server": arm.server.model_copy(
        update={"env": {"PYTHONPATH": str(tmp_path)}})})) == []


def test_why_a_run_signs_nothing_off():
    from harness.records.manifest import RunManifest, RunPair

    done = RunManifest(run_id="r", finished="t", exit_code=0, pairs=[RunPair(candidate="a")])
    assert bb.not_signed_off(done, "a", True) is None
    assert bb.not_signed_off(done, "b", True) == "it qualified a, not arm 'b'"
    assert bb.not_signed_off(done.model_copy(update={"finished": None}), "a", True) == (
        "it never finished (run.json has no end)")
    assert "stored no outputs of a" in bb.not_signed_off(done, "a", False)
