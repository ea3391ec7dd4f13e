"""GSM8K through lm-eval's local-completions against each arm, and the paired statistical gate (computed from
results.jsonl)."""

import pytest

from harness.config.thresholds import load_gates
from harness.config.workloads import Gsm8kWorkload, load_workload, workload_for
from harness.judge.gates import gsm8k_gate
from harness.measure.gsm8k import evaluate, gsm8k_fields, make_model, select_task
from harness.records.schema import GateRecord, Gsm8kRecord
from harness.serve.serverlog import tail


def test_gsm8k(served_arm, harness_session, record):
    arm = served_arm.arm
    w = load_workload(workload_for(harness_session.arm(harness_session.candidate_name), "gsm8k"), kind=Gsm8kWorkload)
    source = select_task(harness_session.run_dir / "gsm8k_task")  # data validated before any request
    lm = make_model(served_arm.info.base_url, arm.model.served_name, w.num_concurrent, w.max_retries,
                    arm.timeouts.request_s, w.max_gen_toks, served_arm.server.check_alive)
    ev = evaluate(lm, source, w.num_fewshot, w.limit, harness_session.run_dir / arm.name / "gsm8k")
    rec = record(Gsm8kRecord, arm=arm.name, **gsm8k_fields(ev, source, w))
    if ev.dead:
        pytest.fail(f"arm {arm.name!r}: server died during GSM8K after {rec.n - ev.request_errors} answered "
                    f"questions; samples kept in {ev.samples_path}.\n{ev.dead}", pytrace=False)
    assert ev.error is None, f"arm {arm.name!r}: {ev.error}\n{tail(served_arm.server.log_text(), 5)}"
    limit = load_gates(harness_session.candidate_name).gsm8k.max_request_errors
    assert ev.request_errors <= limit, (
        f"arm {arm.name!r}: {ev.request_errors} GSM8K request(s) failed after retries (at most {limit}); "
        f"last error: {lm.last_error}")


def test_gsm8k_vs_reference(harness_session, record):
    cand, ref = harness_session.pair()
    gate = gsm8k_gate(harness_session.records(), cand, ref, load_gates(cand).gsm8k)
    record(GateRecord, **gate.record_fields())
    assert gate.passed, gate.detail
