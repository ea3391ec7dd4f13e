"""Fault injection, one table per gate: start from a run whose gates PASS, take one piece of each gate's input away
(or make it partial), and the gate -- computed from the records alone, as `harness report` does -- reads FAIL with
"no data: ...", never PASS; the rendered Gates table then holds no PASS without data, and the run's verdict agrees."""

from __future__ import annotations

import json

import pytest
from reportrun import ARMS, make_run

from harness.config.suites import BY_NAME, gated_suites
from harness.config.thresholds import Gates
from harness.judge.catalogue_gate import catalogue_gates
from harness.records.results import read_results
from harness.report.render import render_run

CAND, REF = ARMS


def drop(kind: str, arm: str, concurrency: int | None = None):
    def fault(rows: list[dict]) -> list[dict]:
        return [r for r in rows if not (r["kind"] == kind and r["arm"] == arm
                                        and (concurrency is None or r.get("concurrency") == concurrency))]
    return fault


def edit(kind: str, arm: str, **fields):
    def fault(rows: list[dict]) -> list[dict]:
        return [{**r, **fields} if r["kind"] == kind and r["arm"] == arm else r for r in rows]
    return fault


def outputs(**fields):
    """The candidate's long_prefix_outputs check (what the TPOT gate counts on) changed; the other checks kept."""
    def fault(rows: list[dict]) -> list[dict]:
        return [{**r, **fields} if r["kind"] == "reference_check" and r["check"] == "long_prefix_outputs" else r
                for r in rows]
    return fault


# gate -> [(fault id, fault, what the detail must say)]
FAULTS = {
    "long_prefix_tpot_p50": [
        ("candidate-missing", drop("long_prefix", CAND), f"no data: no long_prefix record for {CAND}"),
        ("reference-missing", drop("long_prefix", REF), f"no data: no long_prefix record for {REF}"),
        ("candidate-level-missing", drop("long_prefix", CAND, 2), f"no data: {CAND} has no c2 level"),
        ("candidate-aborted", edit("long_prefix", CAND, status="aborted"), f"no data: {CAND} c1 aborted"),
        ("candidate-failed-requests", edit("long_prefix", CAND, failed=8), f"no data: {CAND} c1: 8/8 request(s)"),
        ("reference-no-tpot", edit("long_prefix", REF, tpot={"n": 0, "mean": None, "p50": None, "p90": None,
                                                             "p99": None}), f"no data: {REF} c1 has no TPOT p50"),
        # the timed outputs: never compared, not comparable, or different from the reference's
        ("outputs-not-checked", lambda rows: [r for r in rows if r.get("check") != "long_prefix_outputs"],
         f"outputs invalid: no data: no long_prefix_outputs check of {CAND} against {REF}"),
        ("outputs-reference-failed", outputs(status="aborted", passed=False,
                                             reason=f"no data: request c1 #3: {REF}'s request failed (HTTP 500)"),
         f"outputs invalid: no data: request c1 #3: {REF}'s request failed"),
        ("outputs-differ", outputs(passed=False, exact_matches=0, detail="long_prefix_outputs: 0/8 exact",
                                   diverged=["request c1 #0 [c1]: generated token 1 differs from the reference"]),
         "outputs invalid: long_prefix_outputs: 0/8 exact; request c1 #0 [c1]: generated token 1 differs"),
    ],
    "gsm8k_paired_accuracy": [
        ("candidate-missing", drop("gsm8k", CAND), f"no data: no gsm8k record for {CAND}"),
        ("reference-missing", drop("gsm8k", REF), f"no data: no gsm8k record for {REF}"),
        ("candidate-aborted", edit("gsm8k", CAND, status="aborted"), f"no data: {CAND} GSM8K aborted"),
        ("candidate-all-requests-failed", edit("gsm8k", CAND, request_errors=40), f"no data: {CAND}: 40/40 GSM8K"),
        ("candidate-nothing-answered", edit("gsm8k", CAND, n=0), f"no data: {CAND} answered no GSM8K question"),
        ("reference-no-per-question", edit("gsm8k", REF, per_question={}), f"no data: {REF} has no per-question"),
    ],
}
GATE_SUITE = {"long_prefix_tpot_p50": "long_prefix", "gsm8k_paired_accuracy": "gsm8k"}


def test_every_gate_has_its_fault_table():
    # spec_decode's gates have their own fault table: tests/judge/test_spec_decode_gates.py; long_context's:
    # tests/judge/test_long_context_gate.py; ruler's: tests/judge/test_ruler_gate.py; capacity's:
    # tests/judge/test_capacity_gate.py; the catalogue's timing gates (ttft): tests/judge/test_metric_gate.py
    assert set(GATE_SUITE.values()) | {"spec_decode", "long_context", "ruler", "capacity", "ttft"} == \
        {s.name for s in gated_suites()} \
        and set(FAULTS) == set(GATE_SUITE)


def gates_table(run) -> dict[str, dict]:
    return {g["Gate"]: g for g in json.loads((run / "tables" / "gates.json").read_text())}


def test_the_unfaulted_run_passes_every_gate(tmp_path):
    run = make_run(tmp_path)
    render_run(run)
    assert {g: row["Verdict"] for g, row in gates_table(run).items()} == {g: "PASS" for g in FAULTS}


@pytest.mark.parametrize("gate, fault, needle", [(g, f, n) for g, rows in FAULTS.items() for _, f, n in rows],
                         ids=[f"{g}:{fid}" for g, rows in FAULTS.items() for fid, _, _ in rows])
def test_a_gate_without_its_data_is_fail_no_data(tmp_path, gate, fault, needle):
    run = make_run(tmp_path)
    results = run / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    results.write_text("".join(json.dumps(r) + "\n" for r in fault(rows)))
    records, problems = read_results(results)
    assert not problems
    suite = GATE_SUITE[gate]
    (result,) = [g for g in catalogue_gates(BY_NAME[suite], records, CAND, REF, Gates()) if g.gate == gate]
    assert not result.passed and needle in result.detail, result.detail
    rendered = render_run(run)  # run.json says pytest exited 0: the verdict still follows the failing gate
    assert rendered.exit_code == 1 and "FAILED" in (run / "report.html").read_text()
    row = gates_table(run)[gate]
    assert row["Verdict"] == "FAIL" and needle in row["Detail"]
    assert all(r["Verdict"] != "PASS" or "no data" not in r["Detail"] for r in gates_table(run).values())
