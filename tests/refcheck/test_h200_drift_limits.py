"""The tiny MLA's calibrated limits (gpu-mla, K = 3 on one H200, 2026-12-04: tests/fixtures/
h200_calibration_gpu_mla_2026_12_04.json, docs/evidence/h200-2026-12-04b.md) against comparisons recorded on one H200
on 2026-12-03 with the same weights (4d59b71b...) and prompts (tests/fixtures/h200_drift_2026_12_03/, the gpu-mla-120k
control and its length faults, docs/evidence/h200-2026-12-03.md): the other arm's clean build passes its GSM8K-text
checks at the calibrated limits, the length faults at L = 64,000 fail the long-prompt checks at theirs, and the one
raised limit the hand-set gates.yaml had (2.0) would have let the RoPE fault through."""

import json
from pathlib import Path

from harness.records.schema import RequestComparison, TeacherForcedComparison
from harness.refcheck.compare import judge_comparisons
from harness.report.e2e_summary import read_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "h200_drift_2026_12_03"
CALIBRATED = {c["check"]: c["after"] for c in
              json.loads((FIXTURES / "h200_calibration_gpu_mla_2026_12_04.json").read_text())["checks"]}
HAND_SET = 2.0  # the GSM8K-text checks' drift_limits in gates.yaml before the calibration


def recorded(name: str, model=RequestComparison) -> list:
    return read_lines(RECORDED / name, model)


def judged(check: str, comparisons: list, limit: float | None = None):
    after = CALIBRATED[check]
    return judge_comparisons(check, comparisons, after["drift_limit"] if limit is None else limit, after["tie_gap"])


def test_a_clean_build_passes_its_gsm8k_text_checks_at_the_calibrated_limits():
    forced = recorded("control_teacher_forcing.jsonl", TeacherForcedComparison)
    reuse = recorded("control_prefix_reuse.jsonl")
    assert max(c.max_drift for c in forced) > CALIBRATED["long_context"]["drift_limit"]  # 1.57: the bf16 tail
    for check, comparisons in (("teacher_forcing", forced), ("prefix_reuse", reuse)):
        assert judged(check, comparisons).passed, judged(check, comparisons).detail
        assert CALIBRATED[check]["drift_limit"] < HAND_SET


def test_length_faults_fail_the_long_prompt_checks_at_their_calibrated_limits():
    keys = recorded("keys_64000_long_context.jsonl")
    rope = recorded("rope_64000_long_prefix_outputs.jsonl")
    assert not judged("long_context", keys).passed
    assert not judged("long_prefix_outputs", rope).passed
    # The one raised limit for every check (2.0, with the hand-set tie gap 0.5) lets the RoPE fault's outputs through.
    assert judge_comparisons("long_prefix_outputs", rope, HAND_SET, 0.5).passed
