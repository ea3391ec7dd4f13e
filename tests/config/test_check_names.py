"""The reference checks' names come from the suite catalogue alone (harness/config/suites.py `checks`): gates.yaml's
drift_limits takes each of them, long_context's bursts included, and refuses any other."""

from __future__ import annotations

import pytest

from harness.config import thresholds
from harness.config.errors import ConfigError
from harness.config.suites import BY_NAME, drift_checks


def test_drift_checks_are_the_catalogues_and_long_context_writes_two():
    assert thresholds.DRIFT_CHECKS == drift_checks()
    assert BY_NAME["long_context"].checks == ("long_context", "long_context_bursts")
    assert len(set(drift_checks())) == len(drift_checks())  # no check written by two suites


def test_drift_limits_takes_the_bursts_own_limit_and_refuses_a_name_no_suite_writes(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  reference_checks:\n    drift_limit: 0.25\n    drift_limits: {long_context_bursts: 0.5}\n")
    limits = thresholds.load_gates("x", path).reference_checks
    assert (limits.limit_for("long_context_bursts"), limits.limit_for("long_context")) == (0.5, 0.25)
    path.write_text("defaults:\n  reference_checks:\n    drift_limits: {long_context_burst: 0.5}\n")
    with pytest.raises(ConfigError, match="long_context_burst.*long_context_bursts"):
        thresholds.load_gates("x", path)


def test_tie_gaps_per_check_for_capacity_outputs_with_its_measured_reason(tmp_path):
    # the shipped kvcap arm: capacity_outputs (every level) at its measured 0.5, every other check at the arm's 0
    kvcap = thresholds.load_gates("gpu-mla-kvcap").reference_checks
    assert [kvcap.tie_gap_for(c) for c in ("capacity_outputs_c16", "capacity_outputs", "long_context")] == [0.5, 0.5, 0]
    assert thresholds.load_gates("gpu-mla").reference_checks.tie_gap_for("capacity_outputs_c8") == 0
    text = (thresholds.GATES_FILE).read_text()
    assert "tie_gaps: {capacity_outputs: 0.5}" in text and "docs/evidence/h200-2026-11-29.md" in text
    path = tmp_path / "gates.yaml"
    path.write_text("defaults:\n  reference_checks:\n    tie_gaps: {capacity_output: 0.5}\n")
    with pytest.raises(ConfigError, match="capacity_output.*tie_gaps names checks among"):
        thresholds.load_gates("x", path)


def test_a_capacity_level_flip_is_judged_at_the_checks_own_tie_gap(tmp_path):
    import json

    from harness.records.schema import CapacityRecord, Summary
    from suites.test_capacity import compare_level

    def level(arm: str, tokens: list[int], gap: float) -> CapacityRecord:
        path = tmp_path / f"{arm}.jsonl"
        top = [{str(t): -0.1, str(t + 1): -0.1 - gap} for t in tokens]
        path.write_text(json.dumps({"index": 0, "prompt_tokens": 30000, "token_ids": tokens,
                                    "logprobs": [-0.1] * len(tokens), "top": top}) + "\n")
        return CapacityRecord(run_id="r", arm=arm, suite="capacity", workload="w", prompts_sha="p", concurrency=16,
                              status="complete", requests=1, planned=1, failed=0, duration_s=1.0, output_tokens=3,
                              output_tokens_per_s=3.0, requests_per_s=1.0, gpus=1, ttft=Summary.of([0.1]),
                              tpot=Summary.of([0.01]), samples_path=str(path))

    # the reference's top-2 gap at the flipped token is 0.25 (two bf16 steps): a tie at 0.5, a fault at 0
    cand, ref = level("gpu-mla-kvcap", [5, 7, 8], 0.25), level("gpu-mla-ref-kvcap", [5, 6, 7], 0.25)
    measured = thresholds.load_gates("gpu-mla-kvcap").reference_checks
    at_half = compare_level(cand, [ref], "gpu-mla-ref-kvcap", measured)
    assert at_half["passed"] and at_half["tie_flips"] == 1 and at_half["tie_gap"] == 0.5
    at_zero = compare_level(cand, [ref], "gpu-mla-ref-kvcap", measured.model_copy(update={"tie_gaps": {}}))
    assert not at_zero["passed"] and at_zero["tie_flips"] == 0
