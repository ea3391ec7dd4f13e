"""Build vs build's stored outputs and their comparison (harness/refcheck/judging/build_outputs.py): a clean build (the same
outputs, or a tie flip within the gap) passes the reference-check judging; a planted regression (a confident token
changed, a logprob moved) fails it; outputs of another arm, model, configuration or prompt set are named."""

from __future__ import annotations

import json

import pytest

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.measure.generation import Generation, Sampling
from harness.refcheck.judging import build_outputs as bo
from harness.refcheck.judging.check import CheckLimits, ReferenceCheck
from harness.refcheck.judging.compare import judge_comparisons
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields
from harness.refcheck.prompts.check_prompts import CheckPrompt
from harness.refcheck.store.floor_store import Calibration

PROMPTS = [CheckPrompt("warm", list(range(3000)), "warm"), CheckPrompt("r1 #0", [5, 6, 7], "round 1 (batch 1)")]


def gen(ids, lps, gap=2.0) -> Generation:
    return Generation(list(ids), list(lps), [{t: lp, t + 1000: lp - gap} for t, lp in zip(ids, lps, strict=True)])


BASELINE = {"warm": gen([1, 2, 3, 4], [-0.1, -0.2, -0.3, -0.4]), "r1 #0": gen([9, 8, 7], [-0.5, -0.6, -0.7])}


@pytest.fixture(scope="module")
def arm():
    return load_arm("cpu-smoke")


def stored(tmp_path, arm, outputs=BASELINE, prompts=PROMPTS, identity=None):
    meta = bo.outputs_meta(arm, identity or {"weights_sha": "w"}, "p", Sampling(4, 2), {"build_hash": "b0"})
    return bo.read_doc(bo.save_outputs(tmp_path / arm.name / bo.FILE, meta, prompts, outputs))


def judged(candidate, baseline, drift_limit=0.01, tie_gap=0.0):
    return judge_comparisons(bo.CHECK, bo.compare_builds(PROMPTS, candidate, baseline), drift_limit, tie_gap)


def test_the_same_outputs_stored_and_read_back_pass(tmp_path, arm):
    doc = stored(tmp_path, arm)
    outputs, problems = bo.stored_generations(doc, PROMPTS)
    assert problems == [] and outputs == BASELINE
    verdict = judged(BASELINE, outputs)
    assert verdict.passed, verdict.failures
    assert "2/2 exact" in verdict.detail


def test_a_planted_regression_fails_naming_the_request_and_token(tmp_path, arm):
    outputs, _ = bo.stored_generations(stored(tmp_path, arm), PROMPTS)
    planted = {**BASELINE, "warm": gen([1, 2, 99, 4], [-0.1, -0.2, -0.3, -0.4])}  # a confident token changed
    verdict = judged(planted, outputs)
    assert not verdict.passed
    assert verdict.failures == ["request warm [warm]: generated token 2 differs from the reference (4 vs 4 tokens, "
                                "where the reference's top-2 gap is 2)"]


def test_a_logprob_moved_past_the_limit_fails_and_one_within_it_passes():
    moved = {**BASELINE, "r1 #0": gen([9, 8, 7], [-0.5, -0.65, -0.7])}
    assert not judged(moved, BASELINE).passed
    assert judged(moved, BASELINE, drift_limit=0.06).passed


def test_a_tie_flip_within_the_calibrated_gap_passes_and_beyond_it_fails():
    near_tie = {**BASELINE, "r1 #0": gen([9, 8, 7], [-0.5, -0.6, -0.7], gap=0.004)}
    flipped = {**BASELINE, "r1 #0": gen([9, 8, 1007], [-0.5, -0.6, -0.704])}
    assert judged(flipped, near_tie, tie_gap=0.006).passed
    assert not judged(flipped, near_tie, tie_gap=0.002).passed


def test_nothing_compared_fails():
    verdict = judged(BASELINE, {})
    assert not verdict.passed and verdict.failures == ["no comparisons"]


def test_another_prompt_set_is_named_per_prompt(tmp_path, arm):
    doc = stored(tmp_path, arm)
    other = [CheckPrompt("warm", list(range(1, 3001)), "warm"), CheckPrompt("r2 #0", [1], "round 2")]
    outputs, problems = bo.stored_generations(doc, other)
    assert outputs == {}
    assert len(problems) == 2
    assert problems[0].startswith("baseline build: prompt warm has other tokens (sha ")
    assert problems[1] == "baseline build: prompt r2 #0 missing"


def test_the_build_pin_is_no_configuration_change_but_another_setting_is(tmp_path, arm):
    meta = stored(tmp_path, arm)["meta"]
    assert bo.meta_mismatch(meta, arm, {"weights_sha": "w"}) is None
    pinned = arm.model_copy(update={"server": arm.server.model_copy(update={"env": {**arm.server.env,
                                                                                    "PYTHONPATH": "/scratch"}})})
    assert bo.meta_mismatch(meta, pinned, {"weights_sha": "w"}) is None
    chunked = arm.model_copy(update={"server": arm.server.model_copy(update={"max_num_batched_tokens": 1024})})
    assert "configuration changed since" in bo.meta_mismatch(meta, chunked, {"weights_sha": "w"})
    assert bo.meta_mismatch(meta, arm, {"weights_sha": "v"}) == "they are of another model (weights_sha w vs v)"
    other = arm.model_copy(update={"name": "cpu-ref"})
    assert bo.meta_mismatch(meta, other, {"weights_sha": "w"}) == "they are arm 'cpu-smoke''s, not 'cpu-ref''s"


def test_an_unreadable_or_foreign_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no stored build outputs"):
        bo.read_doc(tmp_path / "none.json")
    (tmp_path / "x.json").write_text(json.dumps({"format": 9}))
    with pytest.raises(ConfigError, match="not a build outputs file of format 1"):
        bo.read_doc(tmp_path / "x.json")


def test_the_power_line_states_outputs_tokens_and_limits():
    comparisons = bo.compare_builds(PROMPTS, BASELINE, BASELINE)
    assert bo.power_line(comparisons, 0.01, 0.006) == (
        "2 outputs, 7 generated tokens compared with the baseline build's: any token differing outside a tie gap of "
        "0.006 or a chosen-token logprob moving more than 0.01 fails")


def limits_of(tmp_path, calibrated: bool, require_floor: bool) -> ReferenceCheck:
    calibration = Calibration(bo.LIMITS_FROM, 0.0104, 0.006, 2, 1.0, "d", "0/2", "2026-12-07", "c", {}) \
        if calibrated else None
    limit, gap = (0.0104, 0.006) if calibrated else (0.01, 0.0)
    return ReferenceCheck(CheckLimits(bo.LIMITS_FROM, "cpu-smoke", limit, gap, require_floor, tmp_path, calibration))


def test_a_calibration_of_the_pair_lends_its_limits_and_without_one_require_floor_still_fails(tmp_path):
    lent = bo.build_check(limits_of(tmp_path, calibrated=True, require_floor=True))
    assert (lent.limits.check, lent.drift_limit, lent.tie_gap, lent.limits.require_floor) == (
        bo.CHECK, 0.0104, 0.006, False)  # no floor of its own to pair with: not required
    assert bo.floor_line(limits_of(tmp_path, True, True)) == {
        "floor": "no floor of its own: judged by prefix_reuse's calibrated limits"}
    bare = limits_of(tmp_path, calibrated=False, require_floor=True)
    assert bo.build_check(bare).limits.require_floor and bo.floor_line(bare) == {}
    same = bo.compare_builds(PROMPTS, BASELINE, BASELINE)
    recorded = record_fields(bo.CHECK, "cpu-smoke@base", "k", BatchComparisons(same), 0.01, tmp_path / "c.jsonl")
    fields = bo.build_check(bare).judge(recorded, same, False).fields
    assert not fields.passed and any("not calibrated" in d for d in fields.diverged)
