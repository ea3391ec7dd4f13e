"""Time to first token, each arm alone: seeded random prompts of each of the workload's lengths (family `ttft`), one
request at a time, streamed; the arm's MetricRecord holds every request's TTFT. Then the catalogue's gate ttft_p50
(harness/config/suites.py MetricGate, harness/judge/metric_gate.py): the candidate's median against its reference's.
Runs when named (`--suites ttft`). A suite of three files: this one, its catalogue entry and its workload YAML."""

import pytest

from harness.config.suites import BY_NAME
from harness.judge.catalogue_gate import catalogue_gates
from harness.measure.metric_workload import metric_fields, run_metric_workload
from harness.plan.preflight import check_workload_fits
from harness.records.schema import GateRecord, MetricRecord

SUITE = BY_NAME["ttft"]


def test_ttft(served_arm, under_test, record):
    arm, w = served_arm.arm, under_test.workload("ttft")
    fits = check_workload_fits(w.name, w.prompt_tokens, w.output_tokens, arm.name, arm.model.max_model_len,
                               "token_ids")
    assert fits.ok, fits.detail
    run = run_metric_workload(served_arm, w)
    rec = record(MetricRecord, arm=arm.name, metric=SUITE.metric_gate.metric, unit="s",
                 **metric_fields(run, lambda s: s.ttft_s),
                 detail=f"{w.name}: {w.requests_per_length} requests at each of {w.lengths} tokens, one at a time")
    if run.level.aborted:
        pytest.fail(f"arm {arm.name!r}: server died during ttft: {run.level.aborted}", pytrace=False)
    assert not rec.failed, f"arm {arm.name!r}: {rec.failed} of {rec.requests} ttft requests failed: {rec.errors}"


def test_ttft_vs_reference(harness_session, under_test, record):
    cand, ref = under_test.pair()
    (gate,) = catalogue_gates(SUITE, harness_session.records(), cand, ref, under_test.thresholds())
    record(GateRecord, **gate.record_fields())
    assert gate.passed or not gate.enforced, gate.detail
