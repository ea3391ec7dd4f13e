"""The capacity gate from records alone: a candidate serving as many levels within the SLO as its reference passes;
a planted per-step slowdown (TPOT past the SLO from c4), invalid outputs at a level, or a failed request moves its
highest level down and fails it; missing or aborted levels are FAIL (no data); the knee and the KV-derived ratio."""

from __future__ import annotations

import pytest

from harness.config.thresholds import CapacityGates
from harness.judge.capacity import at_slo, capacity_gate, check_name, knee, required_ratio, verdicts
from harness.records.schema import CapacityRecord, KvCapacityRecord, ReferenceCheckRecord, Summary

CAND, REF = "cand", "ref"
LIMITS = CapacityGates(slo_tpot_p99_ms=300, slo_ttft_p99_ms=10_000)


def level(arm: str, c: int, tpot_ms: float = 20.0, ttft_ms: float = 100.0, tok_s: float | None = None,
          **fields) -> CapacityRecord:
    n = 2 * c
    base = dict(run_id="r", arm=arm, suite="capacity", workload="w", prompts_sha="p", concurrency=c,
                status="complete", requests=n, planned=n, failed=0, duration_s=2.0, output_tokens=64 * n,
                output_tokens_per_s=tok_s if tok_s is not None else 30.0 * min(c, 4), requests_per_s=n / 2.0, gpus=1,
                ttft=Summary.of([ttft_ms / 1e3] * n), tpot=Summary.of([tpot_ms / 1e3] * n),
                ttft_samples_s=[ttft_ms / 1e3] * n, tpot_samples_s=[tpot_ms / 1e3] * n, samples_path="x")
    return CapacityRecord(**{**base, **fields})


def check(c: int, passed: bool = True) -> ReferenceCheckRecord:
    return ReferenceCheckRecord(run_id="r", arm=CAND, suite="capacity", check=check_name(c), reference=REF,
                                reference_key="run ref", passed=passed, detail="2/2 exact" if passed else "0/2 exact",
                                requests=2, exact_matches=2 if passed else 0, first_divergence_min=None,
                                max_drift=0.0, nonfinite=0, drift_limit=0.01)


def ramp(arm: str, per_level: dict | None = None, levels=(1, 2, 4, 8)) -> list:
    return [level(arm, c, **(per_level or {}).get(c, {})) for c in levels]


def healthy() -> list:
    return [*ramp(REF), *ramp(CAND), *(check(c) for c in (1, 2, 4, 8))]


def test_equal_pairs_pass_naming_both_levels():
    g = capacity_gate(healthy(), CAND, REF, LIMITS)
    assert g.passed and g.numbers["candidate_at_slo"] == g.numbers["reference_at_slo"] == 8, g.detail
    assert "cand serves c8 (the top of its ramp), ref c8: 1.00x, >= 1.00x" in g.detail


def test_a_planted_per_step_slowdown_breaks_the_slo_from_c4_and_fails():
    slow = {c: {"tpot_ms": 20 + 80 * c} for c in (1, 2, 4, 8)}  # 80 ms per request in every step
    records = [*ramp(REF), *ramp(CAND, slow), *(check(c) for c in (1, 2, 4, 8))]
    g = capacity_gate(records, CAND, REF, LIMITS)
    assert not g.passed and g.numbers["candidate_at_slo"] == 2
    assert "cand serves c2 (c4: TPOT p99 340.0 ms > 300 ms), ref c8: 0.25x, < 1.00x" in g.detail


@pytest.mark.parametrize(("fault", "needle"), [
    ({"check": False}, "outputs invalid: 0/2 exact"),
    ({"missing_check": True}, "outputs not compared with the reference's (no data)"),
    ({"failed": 1}, "1/8 request(s) failed"),
    ({"ttft_ms": 20_000}, "TTFT p99 20000.0 ms > 10000 ms"),
    ({"status": "cut", "reason": "still running after max_level_s 300 s"}, "cut: still running"),
])
def test_a_broken_c4_level_stops_the_candidate_at_c2(fault, needle):
    checks = [check(c, passed=not (c == 4 and fault.get("check") is False)) for c in (1, 2, 4, 8)
              if not (c == 4 and fault.get("missing_check"))]
    fields = {k: v for k, v in fault.items() if k not in ("check", "missing_check")}
    records = [*ramp(REF), *ramp(CAND, {4: fields}), *checks]
    g = capacity_gate(records, CAND, REF, LIMITS)
    assert not g.passed and g.numbers["candidate_at_slo"] == 2 and needle in g.detail, g.detail


def test_a_level_above_a_broken_one_does_not_count():
    v = verdicts([*ramp(CAND, {2: {"tpot_ms": 999}}), *(check(c) for c in (1, 2, 4, 8))], CAND, LIMITS, True)
    assert [x.meets for x in v] == [True, False, True, True] and at_slo(v) == 1


@pytest.mark.parametrize(("records", "needle"), [
    (ramp(CAND) + [check(c) for c in (1, 2, 4, 8)], "no data: no capacity level recorded for ref"),
    ([*ramp(REF), *ramp(CAND, {2: {"status": "aborted", "reason": "server died"}})],
     "no data: cand c2 aborted: server died"),
    ([*ramp(REF, {1: {"tpot_ms": 999}}), *ramp(CAND)], "no data: ref meets the SLO"),
])
def test_missing_or_partial_input_is_fail_no_data(records, needle):
    g = capacity_gate(records, CAND, REF, LIMITS)
    assert not g.passed and g.detail.startswith(needle), g.detail


def test_the_knee_is_the_last_level_that_still_paid():
    levels = [level(CAND, c, tok_s=t) for c, t in ((1, 10), (2, 19), (4, 30), (8, 31), (16, 40))]
    assert knee(levels, 0.1) == 4  # 31 is < 10% over 30: the rise at 16 comes after the bend
    assert knee([level(CAND, 1, tok_s=10), level(CAND, 2, tok_s=10.5)], 0.1) == 1
    assert knee([], 0.1) is None


def test_the_kv_ratio_raises_the_factor_asked_up_to_what_the_ramp_can_show():
    limits = CapacityGates(kv_ratio_share=0.5)
    assert required_ratio(limits, 10.2, 64, 4) == (5.1, "0.5 x the KV-capacity ratio 10.20")
    need, why = required_ratio(limits, 10.2, 8, 4)
    assert need == 2.0 and "capped at the ramp's top 8 / 4" in why
    assert required_ratio(limits, None, 64, 4)[0] == 1.0 and required_ratio(CapacityGates(), 10.2, 64, 4)[0] == 1.0
    kv = [KvCapacityRecord(run_id="r", arm=a, suite="kv_capacity", device="GPU", tokens=t, gib_per_worker=None,
                           tp=8, dcp=d, source_line="x") for a, t, d in ((CAND, 19_752_000, 8), (REF, 1_933_000, 1))]
    # 10.2x the KV (the seed's dcp8 vs tp8); the reference holds its SLO to c4, the candidate to c8 of a ramp to c64
    cand_levels = (1, 2, 4, 8, 16, 32, 64)
    records = [*ramp(REF, {8: {"ttft_ms": 20_000}}), *ramp(CAND, {16: {"ttft_ms": 20_000}}, cand_levels),
               *(check(c) for c in cand_levels), *kv]
    g = capacity_gate(records, CAND, REF, limits)
    assert not g.passed and "cand serves c8" in g.detail and "ref c4: 2.00x, < 5.11x (0.5 x the KV-capacity ratio" \
        in g.detail, g.detail
    assert capacity_gate(records, CAND, REF, CapacityGates()).passed  # without the KV share: 2x >= min_ratio 1
