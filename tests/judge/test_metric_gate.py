"""The catalogue's timing gates (harness/judge/metric_gate.py): medians compared within the tolerance in the worse
direction; missing, empty or partial samples read FAIL (no data); gates.yaml's section replaces the tolerance and can
leave the gate unenforced; the ttft suite's gate is dispatched from its catalogue entry alone."""

from __future__ import annotations

import pytest

from harness.config.suites import BY_NAME, MetricGate, Suite
from harness.config.thresholds import Gates, MetricGateLimits
from harness.judge.metric_gate import metric_gate
from harness.judge.suite_gates import evaluate_gates
from harness.records.schema import MetricRecord

# The generic behaviour on a gate of its own (tolerance 0.5); the ttft suite's catalogue entry at the end.
TTFT = Suite("ttft", "ttft", per_arm=True, gate="ttft_p50", records=("metric",),
             gate_kind=MetricGate("ttft_s", "lower", 0.5, "a test's"), default_workload="ttft_short")


def rec(arm: str, samples: list[float], failed: int = 0, suite: str = "ttft", metric: str = "ttft_s") -> MetricRecord:
    return MetricRecord(run_id="r", arm=arm, suite=suite, metric=metric, unit="s", samples=samples,
                        requests=len(samples) + failed, failed=failed, errors=["HTTP 500"] * failed)


def test_a_candidate_within_the_tolerance_passes_and_one_beyond_it_fails():
    ref = rec("ref", [0.010, 0.011, 0.012])
    ok = metric_gate([ref, rec("cand", [0.013, 0.014, 0.015])], "cand", "ref", TTFT, None)  # 1.27x, limit 1.5x
    assert ok.passed and ok.numbers["ratio"] == pytest.approx(14 / 11) and ok.gate == "ttft_p50"
    assert ok.detail == "ttft_s median cand 14.00 ms vs ref 11.00 ms (n 3/3): 1.27x, limit <= 1.50x"
    slow = metric_gate([ref, rec("cand", [0.017, 0.018, 0.019])], "cand", "ref", TTFT, None)  # 1.64x
    assert not slow.passed and slow.enforced


def test_missing_empty_or_partial_samples_read_fail_no_data():
    ref = rec("ref", [0.01])
    unrecorded = "no ttft_s of {} recorded (its ttft test did not run or failed first)"
    for records, why in (([ref], unrecorded.format("cand")), ([ref, rec("cand", [])], "no ttft_s samples of cand"),
                         ([ref, rec("cand", [0.01], failed=2)], "2 of 3 ttft_s requests of cand failed (first: HTTP 500)"),
                         ([rec("cand", [0.01])], unrecorded.format("ref")),
                         ([ref, rec("cand", [0.01], suite="other")], unrecorded.format("cand"))):
        gate = metric_gate(records, "cand", "ref", TTFT, None)
        assert not gate.passed and gate.detail == f"FAIL (no data: {why})", gate.detail


def test_gates_yaml_replaces_the_tolerance_and_can_leave_the_gate_unenforced():
    records = [rec("ref", [0.010]), rec("cand", [0.013])]  # 1.3x
    assert not metric_gate(records, "cand", "ref", TTFT, MetricGateLimits(tolerance=0.2)).passed
    shown = metric_gate(records, "cand", "ref", TTFT, MetricGateLimits(tolerance=0.2, enforce=False))
    assert not shown.passed and not shown.enforced


def test_higher_is_better_fails_below_the_tolerance():
    suite = Suite("tput", "tput", per_arm=True, gate="tput_p50", records=("metric",),
                  gate_kind=MetricGate("tokens_per_s", "higher", 0.1, "test"), default_workload="tput")
    records = [rec("ref", [100.0], suite="tput", metric="tokens_per_s"),
               rec("cand", [95.0], suite="tput", metric="tokens_per_s")]
    assert metric_gate(records, "cand", "ref", suite, None).passed  # 0.95 >= 0.90
    records[1] = rec("cand", [85.0], suite="tput", metric="tokens_per_s")
    gate = metric_gate(records, "cand", "ref", suite, None)
    assert not gate.passed and "limit >= 0.90x" in gate.detail


def test_the_ttft_gate_comes_from_the_catalogue_entry_and_its_gates_yaml_section():
    assert BY_NAME["ttft"].metric_gate.tolerance == 1.2
    records = [rec("ref", [0.010]), rec("cand", [0.013])]
    gates = Gates.model_validate({"metric_gates": {"ttft_p50": {"tolerance": 0.2}}})
    (gate,) = evaluate_gates(records, "cand", "ref", gates, ["ttft"])
    assert gate.gate == "ttft_p50" and not gate.passed and "limit <= 1.20x" in gate.detail
    assert "the limit: gates.yaml metric_gates" in gate.detail
    assert evaluate_gates(records, "cand", "ref", Gates(), ["ttft"])[0].passed  # the catalogue's 1.2
    (slow,) = evaluate_gates([records[0], rec("cand", [0.023])], "cand", "ref", Gates(), ["ttft"])
    assert not slow.passed and "limit <= 2.20x; the limit: 3x the largest |log ratio|" in slow.detail
