"""The "not calibrated" sentence names the one command that works (issue 45 item 9): under require_floor (every GPU
arm) the run FAILs, and accept-floor refuses a failing run, so only `calibrate` is offered; where a floor is optional
(the CPU pair) accepting a known-good run also works and is offered beside it."""

from __future__ import annotations

import pytest

from harness.config.errors import ConfigError
from harness.records.manifest import RunManifest
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.judging.check import CheckLimits, judge_floor
from harness.refcheck.store.accept_floor import accept_floor


def verdict(tmp_path, require_floor: bool):
    limits = CheckLimits("long_context_bursts", "gpu-mla", 0.25, 0.0, require_floor, tmp_path / "floors" / "k", None)
    return judge_floor("long_context_bursts", "gpu-mla-ref", [], False, limits)


def test_a_required_floor_names_calibrate_alone(tmp_path):
    v = verdict(tmp_path, require_floor=True)
    assert v.failure == v.floor and v.floor.startswith(
        "FAIL (no data: not calibrated: no calibration or accepted floor for long_context_bursts of gpu-mla vs "
        "gpu-mla-ref at ")
    assert v.floor.endswith(": run `python -m harness calibrate --arm gpu-mla` on a good build)")
    assert "accept-floor" not in v.floor


def test_an_optional_floor_offers_accepting_a_known_good_run_too(tmp_path):
    v = verdict(tmp_path, require_floor=False)
    assert v.failure is None and "python -m harness calibrate --arm gpu-mla" in v.floor
    assert "`python -m harness accept-floor --run RUN`" in v.floor


def test_accept_floor_is_a_dead_end_for_a_run_that_failed_not_calibrated(tmp_path):
    # why it is not offered under require_floor: the run it would accept failed that very check
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(RunManifest(run_id="run", started="t", finished="t", exit_code=1).to_json())
    v = verdict(tmp_path, require_floor=True)
    rec = ReferenceCheckRecord(run_id="run", arm="gpu-mla", suite="long_context", check="long_context_bursts",
                               reference="gpu-mla-ref", reference_key="k", passed=False, detail="d", requests=1,
                               exact_matches=1, first_divergence_min=None, max_drift=0.0, nonfinite=0,
                               drift_limit=0.25, floor=v.floor, floor_path=v.floor_path, comparisons_path="c.jsonl")
    (run / "results.jsonl").write_text(rec.model_dump_json() + "\n")
    with pytest.raises(ConfigError, match="did not all pass complete"):
        accept_floor(run, "run", "gpu-mla")
