"""Every reference check caps the divergences it exempts as tie flips (refcheck/judging/check.py cap_tie_flips): N over the cap fails
"too many tie flips", N at the cap passes, for a check judged by its calibration (its own clean count, at its part of
the run's budget) and one judged by gates.yaml (degeneration's measured counts); the recorded H200 keys fault was over
long_context's cap at 1 % per check and is inside it at the per-run budget, failed by its other divergences."""

import json
from pathlib import Path

import pytest

from harness.config.thresholds import DegenerationGates
from harness.judge.degeneration import clean_flips, tie_flip_cap
from harness.records.schema import RequestComparison
from harness.refcheck.judging.check import CheckLimits, ReferenceCheck, cap_tie_flips, run_budget
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields
from harness.refcheck.store.floor_store import Calibration

FIXTURES = Path(__file__).parents[1] / "fixtures"
DEGEN = DegenerationGates()
TIE_GAP = 0.01953125  # long_context's calibrated tie gap on the H200 (2026-12-04)


def h200_spread(check: str) -> dict:
    rows = json.loads((FIXTURES / "h200_calibration_gpu_mla_2026_12_04.json").read_text())["checks"]
    return next(r["spread"] for r in rows if r["check"] == check)


def limits(tmp_path: Path, spread: dict | None) -> CheckLimits:
    calibration = None if spread is None else Calibration(
        "long_context", 0.0948, TIE_GAP, 3, 0.0, "derived", "deterministic over 3 repeats", "2026-12-04T00:00:00",
        "cal-h200", spread)
    return CheckLimits("long_context", "gpu-mla", 0.0948, TIE_GAP, False, tmp_path, calibration)


def comparisons(n: int, flipped: int) -> list[RequestComparison]:
    """n outputs, `flipped` of them diverging at a reference gap far inside the tie gap, the rest exact."""
    return [RequestComparison(request=f"r{i}", prompt_tokens=100, exact=i >= flipped,
                              first_divergence=None if i >= flipped else 3, candidate_tokens=16, reference_tokens=16,
                              finite=True, max_drift=0.001, reference_gap_at_divergence=None if i >= flipped else 1e-4)
            for i in range(n)]


def judged(tmp_path: Path, n: int, flipped: int, spread: dict | None):
    run = BatchComparisons(comparisons(n, flipped))
    fields = record_fields("long_context", "gpu-mla-ref", "key", run, 0.0948, tmp_path / "c.jsonl", [], TIE_GAP)
    assert fields.passed  # every divergence is within the tie gap: without the cap, any number of them passes
    return ReferenceCheck(limits(tmp_path, spread), DEGEN).judge(fields, run.comparisons, False).fields


def test_a_calibrated_check_fails_one_flip_over_its_own_clean_count_and_passes_at_the_cap(tmp_path):
    """The cap is judged at the tie-flip cap's part of the check's share of the run's 1 % (error_budget.part_weights:
    a sixth of 0.01 / m; here no other check is calibrated for the arm, m = 1): 36 clean divergences in 3 x 72, 12 of
    72 a repeat -> cap 28 (25 at 1 % per check)."""
    spread = h200_spread("long_context")
    alpha = run_budget(limits(tmp_path, spread)).part("tie-flip cap")
    assert alpha == pytest.approx(0.01 / 6)
    cap = tie_flip_cap(72, clean_flips(DEGEN, spread), alpha)
    assert cap == 28 and tie_flip_cap(72, clean_flips(DEGEN, spread), 0.01) == 25
    assert judged(tmp_path, 72, cap, spread).passed
    over = judged(tmp_path, 72, cap + 1, spread)
    assert not over.passed
    assert over.diverged == ["too many tie flips: 29 of 72 outputs diverged first at a tie flip (calibrated clean rate "
                             "0.167 (12 of 72 a repeat), cap 28: one-sided Fisher exact test, alpha 0.0017)"]


def test_an_uncalibrated_check_is_capped_by_gates_yamls_measured_counts(tmp_path):
    cap = tie_flip_cap(72, clean_flips(DEGEN), DEGEN.tie_flip_alpha)  # 9 of 14 a repeat (H200 long_prefix_outputs)
    assert 0 < cap < 72
    assert judged(tmp_path, 72, cap, None).passed
    over = judged(tmp_path, 72, cap + 1, None)
    assert not over.passed and len(over.diverged) == 1
    assert over.diverged[0].startswith(f"too many tie flips: {cap + 1} of 72 outputs diverged first at a tie flip "
                                       "(uncalibrated: gates.yaml's clean rate 0.643 (9 of 14 a repeat)")


def test_the_recorded_h200_keys_fault_is_inside_the_per_run_cap_and_fails_by_its_other_divergences(tmp_path):
    """keys_past_L_ignored at 64,000 on the H200: 26 of 72 first divergences at a reference gap <= 0.0004. At 1 % per
    check the cap (25) failed them on their own; at the per-run budget (cap 28, m = 1; 32 at gpu-mla's 11 checks) they
    are inside it, and long_context fails the fault by its 12 other lines (divergences, drift over the limit)."""
    rows = (FIXTURES / "h200_drift_2026_12_03" / "keys_64000_long_context.jsonl").read_text().splitlines()
    run = BatchComparisons([RequestComparison.model_validate_json(line) for line in rows])
    fields = record_fields("long_context", "gpu-mla-ref", "key", run, 0.0948, tmp_path / "c.jsonl", [], TIE_GAP)
    assert (fields.tie_flips, fields.requests) == (26, 72)
    capped = cap_tie_flips(fields, limits(tmp_path, h200_spread("long_context")), DEGEN)
    assert capped.diverged == fields.diverged and not capped.passed
    assert len([d for d in fields.diverged if d.startswith("request ")]) == 12
