"""The 120k regression workload (scaled per arm by YAML): TTFT/TPOT/ITL percentiles, KV-cache ("HBM") use,
NVML memory, a cold-start check, and the TPOT gate against the reference arm (computed from results.jsonl)."""

import asyncio
import warnings

import pytest

from harness.config.thresholds import load_gates
from harness.config.workloads import load_workload, workload_for
from harness.judge.checks import long_prefix_failures
from harness.judge.gates import tpot_gate
from harness.measure.long_prefix import cold_start_fields, level_records, measure, server_death
from harness.measure.prompts import build_prompts, token_space
from harness.plan.preflight import check_workload_fits
from harness.records.schema import ColdStartRecord, GateRecord, LongPrefixRecord
from harness.serve.serverlog import tail


def test_long_prefix(served_arm, harness_session, record):
    arm = served_arm.arm
    # The candidate's choice runs on both arms, so the two are measured on the same prompts.
    workload = load_workload(workload_for(harness_session.arm(harness_session.candidate_name), "long_prefix"))
    fits = check_workload_fits(workload.name, workload.prompt_tokens, workload.output_tokens, arm.name,
                               arm.model.max_model_len, workload.prompt_basis)
    assert fits.ok, fits.detail
    prompts = build_prompts(workload, token_space(arm, workload))
    out_dir = harness_session.run_dir / arm.name
    m = asyncio.run(measure(served_arm, workload, prompts, out_dir))
    limits = load_gates(harness_session.candidate_name).long_prefix

    levels = [record(LongPrefixRecord, arm=arm.name, **fields)
              for fields in level_records(m, workload, prompts, out_dir)]
    steady = next((r.tpot.p50 for r in levels if r.concurrency == workload.concurrency[0]), None)
    cold = record(ColdStartRecord, arm=arm.name,
                  **cold_start_fields(m, workload, steady, limits.cold_start_tpot_factor))
    failures, notes = long_prefix_failures(arm.name, levels, cold, limits)
    for note in notes:
        warnings.warn(f"{harness_session.candidate_name}: {note}", stacklevel=1)
    dead = server_death(m)
    if dead:
        pytest.fail(f"arm {arm.name!r}: server died during the long-prefix workload; every finished request "
                    f"is kept in {out_dir}.\n{dead}", pytrace=False)
    assert not failures, "\n".join(failures) + f"\nserver log tail:\n{tail(served_arm.server.log_text(), 5)}"


def test_long_prefix_tpot_vs_reference(harness_session, record):
    cand, ref = harness_session.pair()
    levels = load_workload(workload_for(harness_session.arm(cand), "long_prefix")).concurrency
    gate = tpot_gate(harness_session.records(), cand, ref, load_gates(cand).long_prefix, levels)
    record(GateRecord, **gate.record_fields())
    if not gate.passed and not gate.enforced:
        warnings.warn(gate.detail, stacklevel=1)
        return
    assert gate.passed, gate.detail
