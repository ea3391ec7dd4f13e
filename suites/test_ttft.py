"""Time to first token, each arm alone: seeded random prompts of each of the workload's lengths (family `ttft`), one
request at a time, streamed; the arm's MetricRecord holds every request's TTFT. Then the catalogue's gate ttft_p50
(harness/config/suites.py MetricGate, harness/judge/metric_gate.py): the candidate's median against its reference's.
Runs when named (`--suites ttft`). A suite of three files: this one, its catalogue entry and its workload YAML."""

import asyncio

import pytest

from harness.config.suites import BY_NAME
from harness.judge.metric_gate import metric_gate
from harness.measure.loadgen import run_level
from harness.measure.prompts import metric_prompts, token_space
from harness.plan.preflight import check_workload_fits
from harness.records.schema import GateRecord, MetricRecord

SUITE = BY_NAME["ttft"]


def test_ttft(served_arm, harness_session, record):
    arm, w = served_arm.arm, harness_session.workload("ttft")
    fits = check_workload_fits(w.name, w.prompt_tokens, w.output_tokens, arm.name, arm.model.max_model_len,
                               "token_ids")
    assert fits.ok, fits.detail
    warmup, measured = metric_prompts(w, token_space(arm, w))
    base, model, timeout = served_arm.info.base_url, arm.model.served_name, arm.timeouts.request_s
    alive = served_arm.server.check_alive
    if warmup:
        asyncio.run(run_level(base, model, warmup, w.output_tokens, 1, 0, timeout, alive))
    run = asyncio.run(run_level(base, model, measured, w.output_tokens, 1, 1, timeout, alive))
    failed = [s for s in run.samples if not s.ok or s.ttft_s is None]
    rec = record(MetricRecord, arm=arm.name, metric=SUITE.metric_gate.metric, unit="s",
                 samples=[s.ttft_s for s in run.samples if s.ok and s.ttft_s is not None], requests=len(measured),
                 failed=len(failed) + len(measured) - len(run.samples), errors=[s.error or "no first token"
                                                                           for s in failed][:3],
                 detail=f"{w.name}: {w.requests_per_length} requests at each of {w.lengths} tokens, one at a time")
    if run.aborted:
        pytest.fail(f"arm {arm.name!r}: server died during ttft: {run.aborted}", pytrace=False)
    assert not rec.failed, f"arm {arm.name!r}: {rec.failed} of {rec.requests} ttft requests failed: {rec.errors}"


def test_ttft_vs_reference(harness_session, record):
    cand, ref = harness_session.pair()
    gate = metric_gate(harness_session.records(), cand, ref, SUITE,
                       harness_session.thresholds().metric_gates.get(SUITE.gate))
    record(GateRecord, **gate.record_fields())
    assert gate.passed or not gate.enforced, gate.detail
