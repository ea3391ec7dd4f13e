"""spec_decode gates from records alone: a healthy speculative run passes every gate; each planted fault (low
acceptance, a rising curve, a collapse, unequal outputs, a looping candidate, a draft-KV mismatch) fails its gate; a
gate whose input is missing, aborted or failed reads FAIL "no data: ...", never PASS."""

from __future__ import annotations

import pytest
from reportrun import SPEC_CAND as CAND
from reportrun import SPEC_REF as REF
from reportrun import check, degeneration, healthy, spec

from harness.config.thresholds import Gates, SpecDecodeGates
from harness.judge.spec_decode_gates import curve_violations, spec_decode_gates
from harness.judge.suite_gates import evaluate_gates
from harness.measure.spec_decode_metrics import acceptance_length, position_rates
from harness.records.schema import OutcomeRecord

LIMITS = SpecDecodeGates()


def by_name(records, limits=LIMITS) -> dict:
    return {g.gate: g for g in spec_decode_gates(records, CAND, REF, limits)}


def test_vllms_conventions():
    assert acceptance_length(100, 150) == 2.5 and acceptance_length(0, 0) is None
    assert position_rates([70, 50, 30], 100) == [0.7, 0.5, 0.3]


def test_a_healthy_run_passes_every_gate():
    gates = by_name(healthy())
    assert set(gates) == {"spec_decode_acceptance_length", "spec_decode_position_curve", "spec_decode_collapse",
                          "spec_decode_output_equality", "spec_decode_degeneration"}
    assert all(g.passed for g in gates.values()), [g.detail for g in gates.values() if not g.passed]
    assert "2.500" in gates["spec_decode_acceptance_length"].detail


def replace(records, new):
    return [new if type(r) is type(new) and r.arm == new.arm else r for r in records]


FAULTS = {
    # n-gram: the counters are a function of the outputs, so any distance from the replay fails, up or down
    "ngram-accepts-fewer-than-replay": (replace(healthy(), spec(CAND, accepted=10.0, acceptance_length=1.1,
                                                                accepted_per_pos=[8.0, 2.0, 0.0],
                                                                position_rates=[0.08, 0.02, 0.0])),
                                        "spec_decode_acceptance_length",
                                        "cpu-spec had 10 draft tokens accepted; the replay over its outputs accepts "
                                        "148-152"),
    "ngram-accepts-more-than-replay": (replace(healthy(), spec(CAND, accepted=160.0, acceptance_length=2.6)),
                                       "spec_decode_acceptance_length", "accepts 148-152"),
    "ngram-drafts-off-replay": (replace(healthy(), spec(CAND, drafts=90.0)), "spec_decode_acceptance_length",
                                "cpu-spec made 90 drafts; vLLM's n-gram proposer replayed over its outputs makes 100"),
    # a draft model: its proposals depend on its weights, so the floor
    "draft-model-low-acceptance": (replace(healthy(), spec(CAND, method="draft_model", accepted=10.0,
                                                           acceptance_length=1.1, accepted_per_pos=[8.0, 2.0, 0.0],
                                                           position_rates=[0.08, 0.02, 0.0])),
                                   "spec_decode_acceptance_length", "mean acceptance length 1.100 (10 accepted over "
                                   "100 drafts) < 1.5"),
    "rising-curve": (replace(healthy(), spec(CAND, accepted_per_pos=[40.0, 70.0, 30.0],
                                             position_rates=[0.4, 0.7, 0.3])),
                     "spec_decode_position_curve", "position 1 accepted 0.700 > position 0 0.400"),
    "collapse": (replace(healthy(), spec(CAND, accepted=300.0, acceptance_length=4.0,
                                         accepted_per_pos=[100.0, 100.0, 100.0], position_rates=[1.0, 1.0, 1.0])),
                 "spec_decode_collapse", "acceptance collapse: position(s) [0, 1, 2]"),
    "unequal-outputs": (replace(healthy(), check(passed=False)), "spec_decode_output_equality",
                        "request gsm8k-3: generated token 5 differs"),
    "looping-candidate": (replace(healthy(), degeneration(passed=False)), "spec_decode_degeneration",
                          "request long-1"),
}
NO_DATA = {
    "candidate-missing": ([spec(REF), check(), degeneration()], "no data: no spec_decode record for cpu-spec"),
    "candidate-aborted": (replace(healthy(), spec(CAND, status="aborted", reason="server died")),
                          "no data: cpu-spec spec_decode aborted"),
    "candidate-failed-requests": (replace(healthy(), spec(CAND, failed=3)), "no data: cpu-spec: 3/10"),
    "no-drafts": (replace(healthy(), spec(CAND, drafts=0.0, accepted=0.0, acceptance_length=None,
                                          position_rates=[])), "no data: cpu-spec made no draft"),
    "no-method": (replace(healthy(), spec(CAND, method=None)), "no data: cpu-spec has no speculative config"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_planted_fault_fails_its_gate(fault):
    records, gate, needle = FAULTS[fault]
    g = by_name(records)[gate]
    assert not g.passed and needle in g.detail, g.detail


@pytest.mark.parametrize("fault", NO_DATA)
def test_missing_or_partial_input_is_fail_no_data_on_every_gate_it_feeds(fault):
    records, needle = NO_DATA[fault]
    gates = by_name(records)
    for name in ("spec_decode_acceptance_length", "spec_decode_position_curve", "spec_decode_collapse"):
        assert not gates[name].passed and needle in gates[name].detail, (name, gates[name].detail)


@pytest.mark.parametrize(("fields", "needle"), [
    (dict(replay_drafts=None, replay_accepted=[], replay_problem="the server returned no prompt token ids"),
     "no data: cpu-spec: the server returned no prompt token ids"),
    (dict(replay_drafts=None, replay_accepted=[]), "no data: cpu-spec: no n-gram replay recorded"),  # a stored run
])
def test_an_ngram_arm_without_its_replay_is_no_data(fields, needle):
    gate = by_name(replace(healthy(), spec(CAND, **fields)))["spec_decode_acceptance_length"]
    assert not gate.passed and gate.detail == needle


def test_an_ngram_arm_passes_on_its_replay_not_on_a_floor():
    gate = by_name(healthy(), SpecDecodeGates(min_acceptance_length=3.0))["spec_decode_acceptance_length"]
    assert gate.passed and "= vLLM's n-gram proposer replayed over its outputs (100 drafts, 148-152 accepted)" \
        in gate.detail


def test_missing_comparison_and_degeneration_records_are_no_data():
    gates = by_name([spec(CAND), spec(REF)])
    for name in ("spec_decode_output_equality", "spec_decode_degeneration"):
        assert not gates[name].passed and gates[name].detail.startswith("no data:")
    aborted = by_name(replace(healthy(), check(status="aborted", reason="server died", passed=False)))
    assert aborted["spec_decode_output_equality"].detail.startswith("no data: the comparison was aborted")


def test_collapse_is_allowed_where_the_reference_is_trivially_predictable():
    records = replace(FAULTS["collapse"][0], spec(REF, mean_span_fraction=0.9))
    assert by_name(records)["spec_decode_collapse"].passed
    no_measure = replace(FAULTS["collapse"][0], spec(REF, mean_span_fraction=None))
    assert by_name(no_measure)["spec_decode_collapse"].detail.startswith("no data")


def test_curve_noise_allowance_grows_with_fewer_drafts():
    assert curve_violations([0.5, 0.55], 10, 3.0, 0.02) == []
    assert curve_violations([0.5, 0.55], 100000, 3.0, 0.02) != []


def test_draft_kv_mismatch_and_unstated_policy_fail_where_the_policy_matters():
    declared = replace(healthy(), spec(CAND, draft_kv="sharded", draft_kv_declared="replicated"))
    g = by_name(declared)["spec_decode_draft_kv"]
    assert not g.passed and "draft KV sharded in the server log, the arm declares replicated" in g.detail
    silent = replace(healthy(), spec(CAND, draft_kv="not logged (vLLM 0.25.0 states no draft KV policy)",
                                     draft_kv_declared="replicated"))
    assert by_name(silent)["spec_decode_draft_kv"].detail.startswith("no data: the server did not state")
    assert "spec_decode_draft_kv" not in by_name(healthy())  # ngram on DCP1: nothing to declare


def test_speedup_floor_is_optional():
    limits = SpecDecodeGates(min_speedup=3.0)
    g = by_name(healthy(), limits)["spec_decode_speedup"]
    assert not g.passed and "speed-up 2.00x" in g.detail
    assert by_name(healthy(), SpecDecodeGates(min_speedup=1.5))["spec_decode_speedup"].passed


def test_a_suite_that_skipped_itself_has_no_gates_but_one_that_ran_and_failed_has():
    skipped = [OutcomeRecord(run_id="r", arm=CAND, suite="spec_decode", test="t", outcome="skipped")]
    assert evaluate_gates(skipped, CAND, REF, Gates(), ["spec_decode"]) == []
    failed = [OutcomeRecord(run_id="r", arm=CAND, suite="spec_decode", test="t", outcome="failed")]
    gates = evaluate_gates(failed, CAND, REF, Gates(), ["spec_decode"])
    assert gates and all(not g.passed and g.detail.startswith("no data") for g in gates)
