"""The tiny MLA's limits, before and after its calibration, against comparisons recorded on one H200 on 2026-12-03
with the same weights (4d59b71b...) and prompts (tests/fixtures/h200_drift_2026_12_03/: the gpu-mla-120k control
against its eager reference, and the keys / RoPE length faults at L = 64,000; docs/evidence/h200-2026-12-03.md).

Two sets of limits, a (drift limit, tie gap) per check:
- HAND_SET: what configs/gates.yaml gave the tiny MLA arms until the calibration replaced them (`git show
  872cdda:configs/gates.yaml`, arm gpu-mla): drift_limit 0.25, raised to 2.0 (drift_limits, since 97d9fdf) for the
  GSM8K-text checks only; tie_gap 0.5 for every check. long_context and long_prefix_outputs were judged at 0.25.
- CALIBRATED: gpu-mla's calibration, K = 3 on one H200, 2026-12-04, final derivation
  (tests/fixtures/h200_calibration_gpu_mla_2026_12_04.json, the same file as
  docs/evidence/h200-2026-12-04b/calibration-final.json).

What the recordings show: the control passes its GSM8K-text checks under both. Each length fault fails the check that
judges it under both, so neither verdict is the calibration's doing: the RoPE fault already failed
long_prefix_outputs at 0.25 / 0.5. A fault passes a check exactly when the check's drift limit is at or above the
fault's largest drift and its tie gap covers every divergence the fault makes. The RoPE fault's outputs meet that at
the GSM8K-text checks' hand-set 2.0 / 0.5 and at graph_replay's calibrated limits alike: each check needs its own."""

import json
from pathlib import Path

import pytest

from harness.records.schema import RequestComparison, TeacherForcedComparison
from harness.refcheck.judging.compare import is_tie_flip, judge_comparisons
from harness.report.e2e_summary import read_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "h200_drift_2026_12_03"
CALIBRATION = json.loads((FIXTURES / "h200_calibration_gpu_mla_2026_12_04.json").read_text())
CALIBRATED = {c["check"]: (c["after"]["drift_limit"], c["after"]["tie_gap"]) for c in CALIBRATION["checks"]}
GSM8K_TEXT = ("prefix_reuse", "graph_replay", "graph_replay_eager", "teacher_forcing")
HAND_SET = {check: (2.0 if check in GSM8K_TEXT else 0.25, 0.5)
            for check in ("long_context", "long_prefix_outputs", *GSM8K_TEXT)}
LIMITS = {"hand-set (872cdda)": HAND_SET, "calibrated (2026-12-04)": CALIBRATED}


def recorded(name: str, model=RequestComparison) -> list:
    return read_lines(RECORDED / name, model)


def control() -> dict[str, list]:
    return {"teacher_forcing": recorded("control_teacher_forcing.jsonl", TeacherForcedComparison),
            "prefix_reuse": recorded("control_prefix_reuse.jsonl")}


def failing(check: str, comparisons: list, limits: tuple[float, float]) -> set[tuple[str, str]]:
    return {(c.request, c.group) for c in comparisons if judge_comparisons(check, [c], *limits).failures}


def covered(comparisons: list, limits: tuple[float, float]) -> bool:
    """The limits cover a set of outputs: every drift within the drift limit, every divergence a tie flip."""
    drift_limit, tie_gap = limits
    return all(c.finite and (c.max_drift is None or c.max_drift <= drift_limit) and (c.exact or is_tie_flip(c, tie_gap))
               for c in comparisons)


def test_both_sets_of_limits_name_the_same_checks():
    # A check the calibration judges that the hand-set list lacks would go unexamined below.
    assert set(HAND_SET) == set(CALIBRATED)


@pytest.mark.parametrize("which", LIMITS)
def test_the_clean_control_passes_its_gsm8k_text_checks(which):
    for check, comparisons in control().items():
        verdict = judge_comparisons(check, comparisons, *LIMITS[which][check])
        assert verdict.passed, verdict.detail


def test_the_control_fails_at_the_long_prompts_hand_set_limits_which_is_why_gsm8k_text_got_2():
    # The clean bf16 tail on GSM8K text reaches past the long prompts' 0.25.
    for check, comparisons in control().items():
        assert max(c.max_drift for c in comparisons) > HAND_SET["long_prefix_outputs"][0]
        assert not judge_comparisons(check, comparisons, *HAND_SET["long_prefix_outputs"]).passed


def test_the_rope_fault_failed_long_prefix_outputs_before_the_calibration_and_after():
    rope = recorded("rope_64000_long_prefix_outputs.jsonl")
    before, after = HAND_SET["long_prefix_outputs"], CALIBRATED["long_prefix_outputs"]
    assert not judge_comparisons("long_prefix_outputs", rope, *before).passed
    assert not judge_comparisons("long_prefix_outputs", rope, *after).passed
    # Before: every divergence sat within the tie gap 0.5, so drift alone caught it (the requests over 0.25).
    assert all(is_tie_flip(c, before[1]) for c in rope)
    assert failing("long_prefix_outputs", rope, before) == {(c.request, c.group) for c in rope if c.max_drift > before[0]}
    # After: the tighter limits fail every request the hand-set ones did, and more.
    assert failing("long_prefix_outputs", rope, before) < failing("long_prefix_outputs", rope, after)


def test_the_keys_fault_failed_long_context_before_the_calibration_and_after():
    keys = recorded("keys_64000_long_context.jsonl")
    before, after = HAND_SET["long_context"], CALIBRATED["long_context"]
    assert not judge_comparisons("long_context", keys, *before).passed
    # Its confident flips (a reference top-2 gap above either tie gap) fail on their own; drift fails the rest, and the
    # same requests fail under both sets of limits.
    confident = {(c.request, c.group) for c in keys if not c.exact and not is_tie_flip(c, max(before[1], after[1]))}
    assert confident
    assert confident <= failing("long_context", keys, before) == failing("long_context", keys, after)


@pytest.mark.parametrize("which", LIMITS)
def test_a_fault_passes_exactly_the_checks_whose_limits_cover_it(which):
    faults = {f: recorded(f) for f in ("rope_64000_long_prefix_outputs.jsonl", "keys_64000_long_context.jsonl")}
    for fault, comparisons in faults.items():
        for check, limits in LIMITS[which].items():
            assert judge_comparisons(check, comparisons, *limits).passed == covered(comparisons, limits), \
                (fault, check, limits)
    # The RoPE fault is not covered by its own check's limits, but is by another check's: the GSM8K-text checks'
    # hand-set 2.0 / 0.5, graph_replay's calibrated limits.
    rope = faults["rope_64000_long_prefix_outputs.jsonl"]
    envelope = (max(c.max_drift for c in rope), max(c.reference_gap_at_divergence for c in rope))
    assert not covered(rope, LIMITS[which]["long_prefix_outputs"]), envelope
    assert [check for check, limits in LIMITS[which].items() if covered(rope, limits)], envelope
