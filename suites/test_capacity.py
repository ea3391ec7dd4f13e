"""Capacity, the reason DCP ships: a concurrency ramp at long context on each arm (workload `capacity`) until the
server's own signals say it saturated; per level throughput (total and per GPU), requests/s, TPOT and TTFT p50/p99,
peak KV usage, preemptions, the waiting queue, prefix-cache hits. Then, candidate against reference: every level's
outputs compared with the reference's for the same prompts (a level with invalid outputs has no goodput), and the
gate `capacity_at_slo` (harness/judge/capacity.py): the candidate's highest level meeting the SLO in
configs/gates.yaml against the reference's. Runs when named (`--suites capacity`)."""

import asyncio
from pathlib import Path

import pytest

from harness.config.suites import BY_NAME
from harness.config.workloads import CapacityWorkload
from harness.judge.capacity import check_name, verdicts
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.gates import latest
from harness.measure.capacity import build_capacity_prompts, ramp
from harness.measure.prompts import token_space
from harness.plan.preflight import check_workload_fits
from harness.records.jsonl import read_jsonl
from harness.records.schema import CapacityRecord, GateRecord, ReferenceCheckRecord
from harness.refcheck.judging.compare import checked_to, compare_outputs, judge_comparisons, summary_fields
from harness.refcheck.judging.timed_outputs import generation_of, request_id


def test_capacity(served_arm, harness_session, under_test, record):
    arm = served_arm.arm
    w: CapacityWorkload = under_test.workload("capacity")  # the candidate's, run on both arms: the same prompts
    fits = check_workload_fits(w.name, w.prompt_tokens, w.output_tokens, arm.name, arm.model.max_model_len,
                               "token_ids")
    assert fits.ok, fits.detail
    prompts = build_capacity_prompts(w, token_space(arm, w))
    levels = asyncio.run(ramp(served_arm, w, prompts, harness_session.run_dir / arm.name))
    recs = [record(CapacityRecord, arm=arm.name, **lv.fields) for lv in levels]
    dead = next((lv.aborted for lv in levels if lv.aborted), None)
    if dead:
        pytest.fail(f"arm {arm.name!r}: server died during the capacity ramp at c{recs[-1].concurrency}; every "
                    f"finished request is kept in {recs[-1].samples_path}.\n{dead}", pytrace=False)
    assert recs, f"arm {arm.name!r}: the capacity ramp ran no level"
    # A ramp that ends unsaturated is no failure: the gate then reads the top level as a lower bound ("the top of
    # its ramp"), which is how a DCP arm with 10x the KV may well end.


def rows_by_index(path: str) -> dict[int, dict]:
    rows, _ = read_jsonl(Path(path)) if Path(path).is_file() else ([], [])
    return {int(r["index"]): r for r in rows if "index" in r}


def compare_level(cand: CapacityRecord, ref_levels: list[CapacityRecord], ref: str, limits) -> dict:
    """A ReferenceCheckRecord's fields for one candidate level: each request against the reference's output for the
    same prompt (request i is the same prompt at every level; the reference's same level first, else its lowest
    level that sent it). Requests the reference never sent are counted as not compared."""
    mine = rows_by_index(cand.samples_path)
    theirs: dict[int, dict] = {}
    for r in sorted(ref_levels, key=lambda r: (r.concurrency != cand.concurrency, r.concurrency)):
        for i, row in rows_by_index(r.samples_path).items():
            theirs.setdefault(i, row)
    comparisons, gaps = [], []
    for i, row in sorted(mine.items()):
        c_gen, r_row = generation_of(row), theirs.get(i)
        r_gen = generation_of(r_row) if r_row else None
        if c_gen is None:
            gaps.append(f"request {request_id(cand.concurrency, i)}: the candidate's request failed")
        elif r_gen is None:
            continue  # the reference's ramp stopped below this prompt: not compared, counted below
        else:
            comparisons.append(compare_outputs(request_id(cand.concurrency, i), int(row.get("prompt_tokens") or 0),
                                               c_gen, r_gen, group=f"c{cand.concurrency}"))
    limit, tie_gap = limits.limit_for(check_name(cand.concurrency)), limits.tie_gap_for(check_name(cand.concurrency))
    judged = judge_comparisons(check_name(cand.concurrency), comparisons, limit, tie_gap)
    uncovered = len(mine) - len(comparisons) - len(gaps)
    failures = [*gaps, *judged.failures]
    detail = judged.detail + (f"; {uncovered} of {len(mine)} request(s) beyond the reference's ramp, not compared"
                              if uncovered else "")
    no_data = not comparisons
    return {"check": check_name(cand.concurrency), "reference": ref, "passed": not failures and not no_data,
            "detail": detail, "drift_limit": limit, "diverged": failures,
            "status": "aborted" if no_data else "complete",
            "reason": "no data: no request of this level was compared" if no_data else None,
            "checked_to_tokens": checked_to(comparisons), **summary_fields(comparisons, tie_gap)}


def test_capacity_vs_reference(harness_session, under_test, record):
    cand, ref = under_test.pair()
    gates = under_test.thresholds()
    records = harness_session.records()
    ref_levels = latest(records, CapacityRecord, ref)
    for level in sorted(latest(records, CapacityRecord, cand), key=lambda r: r.concurrency):
        record(ReferenceCheckRecord, arm=cand, reference_key=f"run {ref}",
               **compare_level(level, ref_levels, ref, gates.reference_checks))
    (gate,) = catalogue_gates(BY_NAME["capacity"], harness_session.records(), cand, ref, gates)
    record(GateRecord, **gate.record_fields())
    lines = [f"c{v.concurrency}: {v.why}" for v in verdicts(harness_session.records(), cand, gates.capacity, True)]
    assert gate.passed, gate.detail + "\n" + "\n".join(lines)
