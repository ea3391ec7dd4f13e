"""Performance counts only with valid outputs, and coverage is stated (issue 22 parts 3 and 5): every verdict path of
the TPOT gate against the candidate's long_prefix_outputs check, the headline's TPOT and coverage lines, the
Performance table's outputs cell, and the optional coverage gate."""

from __future__ import annotations

from harness.config.suites import BY_NAME
from harness.config.thresholds import CoverageGates, Gates, LongPrefixGates, load_gates
from harness.judge import gates, suite_gates
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.validity import coverage, coverage_sentence, outputs_invalid
from harness.records.schema import LongContextRecord, LongPrefixRecord, ReferenceCheckRecord, Summary
from harness.report.headline import headline
from harness.report.tables import performance_table

TOL = LongPrefixGates(tpot_p50_tolerance=0.05)
CPU = LongPrefixGates(tpot_p50_tolerance=0.5, enforce_timing=False)  # the CPU pair: timing not enforced


def lp(arm: str, conc: int, tpot_p50: float, timed_to: int | None = 120_400) -> LongPrefixRecord:
    tpot = Summary(n=8, mean=tpot_p50, p50=tpot_p50, p90=tpot_p50, p99=tpot_p50)
    return LongPrefixRecord(run_id="r", arm=arm, suite="long_prefix", workload="w", prompts_sha="sha",
                            concurrency=conc, status="complete", requests=8, failed=0, ttft=Summary.of([0.1]),
                            tpot=tpot, itl=tpot, e2e=Summary.of([1.0]), kv_usage=None, gpu_memory_mib=None,
                            samples_path="s", timed_to_tokens=timed_to)


def check(arm: str = "gpu-mla", check: str = "long_prefix_outputs", reference: str = "gpu-mla-ref",
          passed: bool = True, checked_to: int | None = 120_400, **kw) -> ReferenceCheckRecord:
    fields = dict(run_id="r", arm=arm, suite="long_prefix", check=check, reference=reference, reference_key="k",
                  passed=passed, requests=16, exact_matches=16 if passed else 0, first_divergence_min=None,
                  max_drift=0.0, nonfinite=0, drift_limit=0.25, tie_gap=0.5, checked_to_tokens=checked_to,
                  detail=f"{check}: 16/16 exact" if passed else f"{check}: 0/16 exact; 16 request(s) failed",
                  diverged=[] if passed else ["request c1 #0 [c1]: generated token 1 differs from the reference "
                                              "(400 vs 400 tokens, where the reference's top-2 gap is 3.5)"])
    return ReferenceCheckRecord(**{**fields, **kw})


# the planted MLA fault: the candidate looked 29.4 % faster while its outputs diverged at the 2nd token
FASTER = [lp("gpu-mla", 1, 0.002744), lp("gpu-mla-ref", 1, 0.003887)]
SLOWER = [lp("gpu-mla", 1, 0.0050), lp("gpu-mla-ref", 1, 0.003887)]


def test_valid_outputs_leave_the_tpot_gate_as_it_was():
    r = gates.tpot_gate([*FASTER, check()], "gpu-mla", "gpu-mla-ref", TOL)
    assert r.passed and r.detail == "TPOT p50 within 0.05 of gpu-mla-ref at every concurrency"
    assert round(r.numbers["c1_ratio"], 3) == 0.706
    slow = gates.tpot_gate([*SLOWER, check()], "gpu-mla", "gpu-mla-ref", TOL)
    assert not slow.passed and slow.detail.startswith("c1: gpu-mla TPOT p50 5.000 ms > gpu-mla-ref 3.887 ms")


def test_invalid_outputs_fail_the_tpot_gate_with_no_speed_up_even_where_timing_is_not_enforced():
    for limits in (TOL, CPU):
        r = gates.tpot_gate([*FASTER, check(passed=False)], "gpu-mla", "gpu-mla-ref", limits)
        assert not r.passed and r.enforced, limits
        assert r.detail.startswith("outputs invalid: long_prefix_outputs: 0/16 exact; 16 request(s) failed; "
                                   "request c1 #0 [c1]: generated token 1 differs"), r.detail
        assert r.numbers == {}  # no ratio: a faster TPOT of wrong outputs is no speed-up
        assert "not enforced" not in r.detail


def test_outputs_not_compared_fail_no_data():
    missing = gates.tpot_gate(FASTER, "gpu-mla", "gpu-mla-ref", CPU)
    assert not missing.passed and missing.enforced
    assert missing.detail.startswith("outputs invalid: no data: no long_prefix_outputs check of gpu-mla against "
                                     "gpu-mla-ref")
    # the reference's outputs were missing (its request failed): the check is aborted, validity unknown
    unknown = check(passed=False, status="aborted", checked_to=None,
                    reason="no data: request c1 #3: gpu-mla-ref's request failed (HTTP 500) (and 1 more)")
    r = gates.tpot_gate([*FASTER, unknown], "gpu-mla", "gpu-mla-ref", TOL)
    assert r.detail.startswith("outputs invalid: no data: request c1 #3: gpu-mla-ref's request failed")
    # an aborted check whose reason does not say so still reads no data
    died = check(passed=False, status="aborted", reason="teacher forcing c2 #5: server died (exit -9)")
    assert outputs_invalid([died], "gpu-mla", "gpu-mla-ref") == "no data: teacher forcing c2 #5: server died (exit -9)"


def test_a_check_against_another_arm_does_not_validate_the_pair():
    eager = check(reference="gpu-mla-eager")  # the candidate against itself, not against its reference
    assert outputs_invalid([eager], "gpu-mla", "gpu-mla-ref").startswith("no data: no long_prefix_outputs check")
    other = check(check="prefix_reuse")
    assert outputs_invalid([other], "gpu-mla", "gpu-mla-ref").startswith("no data")
    # the latest check counts (a resumed run re-ran the test)
    assert outputs_invalid([check(passed=False), check()], "gpu-mla", "gpu-mla-ref") is None


def grid(first_failing: int | None, arm: str = "gpu-mla", reference: str = "gpu-mla-ref",
         lengths: tuple[int, ...] = (32_768, 98_304, 122_000)) -> LongContextRecord:
    """A long_context grid of the candidate: passing (None) or failing from `first_failing` tokens."""
    return LongContextRecord(run_id="r", arm=arm, suite="long_context", workload="long_context_gpu_120k",
                             reference=reference, reference_key="k", prompts_sha="p", needle_source="x",
                             prefix_caching="on", lengths=list(lengths), depths=[0.95], modes=["cold"],
                             first_failing_length=first_failing, checked_to_tokens=122_032,
                             passed=first_failing is None,
                             failures=[] if first_failing is None else ["request L122000-d0.95-cold: token 1 differs"])


def test_a_long_context_failure_within_the_timed_context_invalidates_the_speed_up():
    """The timed prompts' outputs matched (ordinary text barely depends on far keys), but the needle grid failed at a
    length the run timed, or between its last passing length and the timed one: no speed-up. A failure only beyond
    a length proven at or past the timed context, or a passing grid, leaves the gate as it was."""
    within = gates.tpot_gate([*FASTER, check(), grid(32_768)], "gpu-mla", "gpu-mla-ref", TOL)
    assert not within.passed and within.numbers == {}
    assert within.detail == ("outputs invalid: long_context fails from 32,768 tokens (its shortest length); the run "
                             "timed 120,400-token contexts")
    # a fault from 100k: 98,304 passes, 122,000 fails; the timed 120,400 lies between, so it is not proven valid
    between = gates.tpot_gate([*FASTER, check(), grid(122_000)], "gpu-mla", "gpu-mla-ref", TOL)
    assert between.detail == ("outputs invalid: long_context fails from 122,000 tokens (passes to 98,304); the run "
                              "timed 120,400-token contexts")
    proven = gates.tpot_gate([*FASTER, check(), grid(122_000, lengths=(98_304, 120_400, 122_000))], "gpu-mla",
                             "gpu-mla-ref", TOL)
    assert proven.passed and round(proven.numbers["c1_ratio"], 3) == 0.706
    for fine in (grid(None), grid(32_768, reference="other-ref"), grid(32_768, arm="other")):
        assert outputs_invalid([*FASTER, check(), fine], "gpu-mla", "gpu-mla-ref") is None
    tpot = [line for line in headline([*FASTER, check(), grid(32_768)], [("gpu-mla", "gpu-mla-ref")], [])
            if line.startswith("TPOT")]
    assert tpot == ["TPOT p50 c1: FAIL (outputs invalid: long_context fails from 32,768 tokens (its shortest "
                    "length); the run timed 120,400-token contexts)"]


def test_headline_credits_a_speed_up_only_with_valid_outputs():
    pairs = [("gpu-mla", "gpu-mla-ref")]
    good = headline([*FASTER, check()], pairs, [])
    assert "TPOT p50 c1: gpu-mla 2.744 ms vs gpu-mla-ref 3.887 ms (-29.4%)" in good
    bad = headline([*FASTER, check(passed=False)], pairs, [])
    tpot = [line for line in bad if line.startswith("TPOT")]
    assert tpot == ["TPOT p50 c1: FAIL (outputs invalid: long_prefix_outputs: 0/16 exact; 16 request(s) failed; "
                    "request c1 #0 [c1]: generated token 1 differs from the reference (400 vs 400 tokens, where the "
                    "reference's top-2 gap is 3.5))"]
    assert not any("%" in line for line in tpot) and "ms" not in tpot[0]
    gate = gates.tpot_gate([*FASTER, check(passed=False)], "gpu-mla", "gpu-mla-ref", CPU)
    assert f"Gate long_prefix_tpot_p50: FAIL ({gate.detail})" in headline([*FASTER, check(passed=False)], pairs,
                                                                          [gate])
    assert gate.detail.startswith("outputs invalid: ")


def test_performance_table_says_whether_each_rows_outputs_count():
    refs = {"gpu-mla": "gpu-mla-ref"}
    rows = performance_table([*FASTER, check(tie_flips=2)], ["gpu-mla", "gpu-mla-ref"], refs).to_dict("records")
    assert [r["Outputs vs reference"] for r in rows] == ["valid: 16/16 exact (+2 tie flips)", "reference"]
    rows = performance_table([*FASTER, check(passed=False)], ["gpu-mla", "gpu-mla-ref"], refs).to_dict("records")
    assert rows[0]["Outputs vs reference"].startswith("INVALID: long_prefix_outputs: 0/16 exact")
    rows = performance_table(FASTER, ["gpu-mla", "gpu-mla-ref"], refs).to_dict("records")
    assert rows[0]["Outputs vs reference"].startswith("INVALID: no data: no long_prefix_outputs check")


def test_coverage_sentence_states_checked_against_timed():
    # checked as far as timed: the long-prefix outputs themselves were compared at 120,400
    c = coverage([*FASTER, check(), check(check="prefix_reuse", checked_to=20_032)], "gpu-mla", "gpu-mla-ref")
    assert (c.checked_to, c.timed_to, c.short) == (120_400, 120_400, False)
    assert coverage_sentence(c) == "outputs checked to 120,400 tokens; timed at 120,400 tokens"
    # the gap: reference checks to 20k, timing at 120k
    short = coverage([*FASTER, check(check="prefix_reuse", checked_to=20_032),
                      check(check="graph_replay_eager", reference="gpu-mla-eager", checked_to=200_000)],
                     "gpu-mla", "gpu-mla-ref")
    assert coverage_sentence(short) == ("outputs checked to 20,032 tokens; timed at 120,400 tokens: timed 100,368 "
                                        "tokens past the longest checked context")
    assert coverage_sentence(coverage(FASTER, "gpu-mla", "gpu-mla-ref")) == (
        "outputs not checked; timed at 120,400 tokens: timed where no output was checked")
    assert coverage_sentence(coverage([check()], "gpu-mla", "gpu-mla-ref")) == (
        "outputs checked to 120,400 tokens; nothing timed")
    # records written before the fields existed
    old = coverage([lp("gpu-mla", 1, 0.003, timed_to=None), check(checked_to=None)], "gpu-mla", "gpu-mla-ref")
    assert coverage_sentence(old) == ("outputs checked, to a length not recorded (the records predate "
                                      "checked_to_tokens); timed at a length not recorded (the records predate "
                                      "timed_to_tokens)")


def test_coverage_line_in_the_headline_on_every_pair():
    lines = headline([*FASTER, check(check="prefix_reuse", checked_to=20_032)], [("gpu-mla", "gpu-mla-ref")], [])
    assert ("Coverage: outputs checked to 20,032 tokens; timed at 120,400 tokens: timed 100,368 tokens past the "
            "longest checked context") in lines
    assert "Coverage: outputs not checked; nothing timed" in headline([], [("a", "b")], [])
    named = headline([check()], [("gpu-mla", "gpu-mla-ref"), ("x", "gpu-mla-ref")], [])
    assert "Coverage gpu-mla: outputs checked to 120,400 tokens; nothing timed" in named


def test_coverage_gate_only_where_gates_yaml_asks_and_fails_when_timed_past_the_checks():
    assert load_gates("cpu-smoke").coverage.require_checked_to_timed is False  # the shipped default
    assert load_gates("gpu-mla").long_prefix.teacher_forced_requests == 2
    records = [*FASTER, check(), check(check="prefix_reuse", checked_to=20_032)]
    off = catalogue_gates(BY_NAME["long_prefix"], records, "gpu-mla", "gpu-mla-ref", Gates())
    assert [g.gate for g in off] == ["long_prefix_tpot_p50"]
    on = Gates(coverage=CoverageGates(require_checked_to_timed=True))
    ok = catalogue_gates(BY_NAME["long_prefix"], records, "gpu-mla", "gpu-mla-ref", on)
    assert [(g.gate, g.passed, g.enforced) for g in ok] == [("long_prefix_tpot_p50", True, True),
                                                           ("coverage_checked_to_timed", True, True)]
    assert ok[1].numbers == {"checked_to_tokens": 120_400, "timed_to_tokens": 120_400}
    # only the short reference checks: timed past them -> FAIL
    short = gates.coverage_gate([*FASTER, check(check="prefix_reuse", checked_to=20_032)], "gpu-mla", "gpu-mla-ref",
                                on.coverage)
    assert not short.passed and short.detail == ("outputs checked to 20,032 tokens; timed at 120,400 tokens: timed "
                                                 "100,368 tokens past the longest checked context")
    nothing = gates.coverage_gate(FASTER, "gpu-mla", "gpu-mla-ref", on.coverage)
    assert not nothing.passed and nothing.detail.startswith("no data: outputs not checked")
    evaluated = suite_gates.evaluate_gates(records, "gpu-mla", "gpu-mla-ref", on, ["long_prefix"])
    assert [g.gate for g in evaluated] == ["long_prefix_tpot_p50", "coverage_checked_to_timed"]


def test_headline_says_beside_a_tpot_figure_that_timing_is_not_enforced():
    """The CPU pair's TPOT gate is computed, not enforced (client-side TPOT on shared cores measures bursts): its
    -29 % must not be pasted as a speed-up, so the figure says so; an enforcing gate leaves the line bare."""
    pairs, records = [("gpu-mla", "gpu-mla-ref")], [*FASTER, check()]
    relaxed = gates.tpot_gate(records, "gpu-mla", "gpu-mla-ref", CPU)
    enforcing = gates.tpot_gate(records, "gpu-mla", "gpu-mla-ref", TOL)
    assert not relaxed.enforced and enforcing.enforced
    line = "TPOT p50 c1: gpu-mla 2.744 ms vs gpu-mla-ref 3.887 ms (-29.4%)"
    assert line + " [timing not enforced for this arm: gates.yaml enforce_timing false]" in headline(
        records, pairs, [relaxed])
    assert line in headline(records, pairs, [enforcing])
