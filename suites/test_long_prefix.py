"""The 120k regression workload (scaled per arm by YAML): TTFT/TPOT/ITL percentiles, KV-cache ("HBM") use,
NVML memory, a cold-start check, and the TPOT gate against the reference arm (computed from results.jsonl).

A candidate's timed outputs are compared with the reference's on the same prompts in its own test, while its server
is up (a sample is teacher-forced on it): the TPOT gate counts only with valid outputs (harness/judge/validity.py)."""

import asyncio
import warnings

import pytest

from harness.config.suites import BY_NAME
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.checks import long_prefix_failures
from harness.judge.degeneration import degeneration_fields
from harness.measure.long_prefix import cold_start_fields, level_records, measure, server_death
from harness.measure.prompts import build_prompts, token_space
from harness.plan.preflight import check_workload_fits
from harness.records.schema import (
    ColdStartRecord,
    DegenerationRecord,
    GateRecord,
    LongPrefixRecord,
    ReferenceCheckRecord,
)
from harness.refcheck.judging.compare import tie_flipped
from harness.refcheck.judging.timed_outputs import CHECK, checked_fields
from harness.refcheck.send.timed_check import compare_timed_outputs
from harness.serve.serverlog import tail


def check_outputs(session, under_test, live, workload, prompts, nodeid: str, record) -> ReferenceCheckRecord:
    """The candidate's timed outputs against the reference's (both arms' samples files of this run), with a sample
    teacher-forced on the candidate; recorded, with the degeneration detector's verdict on the same pairs."""
    _, ref = under_test.pair()
    session.wait_for_reference(nodeid, ref)  # parallel: the reference's own long_prefix test runs in another worker
    gates = under_test.thresholds()
    run = compare_timed_outputs(live, workload, prompts, session.records(), ref, session.run_dir,
                                gates.long_prefix.teacher_forced_requests)
    # The floor pairs this run with an accepted one of the same candidate config, reference config, prompts and
    # model: the reference's outputs are this run's (UnderTest.run_outputs_key).
    key, noise = under_test.run_outputs_key(run.reference_key)
    check = under_test.reference_check(CHECK, noise)
    loops = record(DegenerationRecord, arm=live.arm.name, **degeneration_fields(
        run.outputs, ref, gates.degeneration, tie_flipped=tie_flipped(run.generated, check.tie_gap),
        calibrated=check.calibrated_spread))
    fields = checked_fields(run, ref, check.drift_limit, check.tie_gap, loops.flagged, reference_key=key)
    judged = check.judge(fields, run.comparisons, fields.status == "aborted")
    return record(ReferenceCheckRecord, arm=live.arm.name, of=judged.fields, comparisons_path=str(run.sink))


def test_long_prefix(served_arm, harness_session, under_test, record, request):
    arm = served_arm.arm
    # The candidate's choice runs on both arms, so the two are measured on the same prompts.
    workload = under_test.workload("long_prefix")
    fits = check_workload_fits(workload.name, workload.prompt_tokens, workload.output_tokens, arm.name,
                               arm.model.max_model_len, workload.prompt_basis)
    assert fits.ok, fits.detail
    prompts = build_prompts(workload, token_space(arm, workload))
    out_dir = harness_session.run_dir / arm.name
    m = asyncio.run(measure(served_arm, workload, prompts, out_dir))
    limits = under_test.thresholds().long_prefix

    levels = [record(LongPrefixRecord, arm=arm.name, **fields)
              for fields in level_records(m, workload, prompts, out_dir)]
    steady = next((r for r in levels if r.concurrency == workload.concurrency[0]), None)
    cold = record(ColdStartRecord, arm=arm.name,
                  **cold_start_fields(m, workload, steady, limits.cold_start_tpot_factor))
    failures, notes = long_prefix_failures(arm.name, levels, cold, limits)
    for note in notes:
        warnings.warn(f"{under_test.candidate}: {note}", stacklevel=1)
    ref = harness_session.reference_of(arm.name)  # set where this arm is a candidate
    outputs = (check_outputs(harness_session, under_test, served_arm, workload, prompts, request.node.nodeid, record)
               if ref else None)
    dead = server_death(m)
    if dead:
        pytest.fail(f"arm {arm.name!r}: server died during the long-prefix workload; every finished request "
                    f"is kept in {out_dir}.\n{dead}", pytrace=False)
    if outputs is not None and not outputs.passed:
        failures.append(f"{arm.name}'s timed outputs against {ref}'s (its TPOT does not count): {outputs.detail}\n"
                        + "\n".join(outputs.diverged[:20]))
    assert not failures, "\n".join(failures) + f"\nserver log tail:\n{tail(served_arm.server.log_text(), 5)}"


def test_long_prefix_tpot_vs_reference(harness_session, under_test, record):
    cand, ref = under_test.pair()
    levels = under_test.workload("long_prefix").concurrency
    gates = catalogue_gates(BY_NAME["long_prefix"], harness_session.records(), cand, ref, under_test.thresholds(),
                            {"long_prefix": {"concurrency": levels}})
    for gate in gates:
        record(GateRecord, **gate.record_fields())
    for gate in (g for g in gates if not g.passed and not g.enforced):
        warnings.warn(gate.detail, stacklevel=1)
    failed = [g for g in gates if not g.passed and g.enforced]
    assert not failed, "\n".join(f"{g.gate}: {g.detail}" for g in failed)
