"""Every reference check caps the divergences it exempts as tie flips (refcheck/check.py cap_tie_flips): N over the cap fails
"too many tie flips", N at the cap passes, for a check judged by its calibration (its own clean count) and one judged
by gates.yaml (degeneration's measured counts); the recorded H200 keys fault is over long_context's cap."""

import json
from pathlib import Path

from harness.config.thresholds import DegenerationGates
from harness.judge.degeneration import clean_flips, tie_flip_cap
from harness.records.schema import RequestComparison
from harness.refcheck.batches import BatchComparisons, record_fields
from harness.refcheck.check import CheckLimits, ReferenceCheck, cap_tie_flips
from harness.refcheck.floor_store import Calibration

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
    spread = h200_spread("long_context")  # 36 clean divergences in 3 x 72: 12 of 72 a repeat -> cap 25
    cap = tie_flip_cap(72, clean_flips(DEGEN, spread), DEGEN.tie_flip_alpha)
    assert cap == 25
    assert judged(tmp_path, 72, cap, spread).passed
    over = judged(tmp_path, 72, cap + 1, spread)
    assert not over.passed
    assert over.diverged == ["too many tie flips: 26 of 72 outputs diverged first at a tie flip (calibrated clean rate "
                             "0.167 (12 of 72 a repeat), cap 25: one-sided Fisher exact test, alpha 0.01)"]


def test_an_uncalibrated_check_is_capped_by_gates_yamls_measured_counts(tmp_path):
    cap = tie_flip_cap(72, clean_flips(DEGEN), DEGEN.tie_flip_alpha)  # 9 of 14 a repeat (H200 long_prefix_outputs)
    assert 0 < cap < 72
    assert judged(tmp_path, 72, cap, None).passed
    over = judged(tmp_path, 72, cap + 1, None)
    assert not over.passed and len(over.diverged) == 1
    assert over.diverged[0].startswith(f"too many tie flips: {cap + 1} of 72 outputs diverged first at a tie flip "
                                       "(uncalibrated: gates.yaml's clean rate 0.643 (9 of 14 a repeat)")


def test_the_recorded_h200_keys_fault_is_over_long_contexts_cap(tmp_path):
    """keys_past_L_ignored at 64,000 on the H200: 26 of 72 first divergences at a reference gap <= 0.0004. Before the
    cap, long_context failed it only on its other 7 divergences; its near-tie flips now fail it on their own."""
    rows = (FIXTURES / "h200_drift_2026_12_03" / "keys_64000_long_context.jsonl").read_text().splitlines()
    run = BatchComparisons([RequestComparison.model_validate_json(line) for line in rows])
    fields = record_fields("long_context", "gpu-mla-ref", "key", run, 0.0948, tmp_path / "c.jsonl", [], TIE_GAP)
    assert (fields.tie_flips, fields.requests) == (26, 72)
    capped = cap_tie_flips(fields, limits(tmp_path, h200_spread("long_context")), DEGEN)
    assert not capped.passed
    assert capped.diverged[-1].startswith("too many tie flips: 26 of 72 outputs diverged first at a tie flip "
                                          "(calibrated clean rate 0.167 (12 of 72 a repeat), cap 25")
    assert capped.diverged[:-1] == fields.diverged


def test_the_cap_sentence_is_listed_once_where_the_degeneration_lines_already_carry_it(tmp_path):
    spread = h200_spread("long_context")
    first = judged(tmp_path, 72, 30, spread)
    again = cap_tie_flips(first, limits(tmp_path, spread), DEGEN)
    assert not again.passed and again.diverged == first.diverged and len(again.diverged) == 1
