"""Candidate-vs-reference gates computed from records alone; missing, failed or partial input reads FAIL."""

from harness.config.suites import BY_NAME
from harness.config.thresholds import Gates, Gsm8kGates, LongPrefixGates
from harness.judge import gates, suite_gates
from harness.judge.catalogue_gate import catalogue_gates
from harness.records.schema import FilterScore, Gsm8kRecord, LongPrefixRecord, ReferenceCheckRecord, Summary

TOL = LongPrefixGates(tpot_p50_tolerance=0.05)


def gsm8k_gate(records: list, cand: str, ref: str, limits: Gsm8kGates):
    """GSM8K's gate, judged through its catalogue entry (an AccuracyGate) as its test and the report judge it."""
    (gate,) = catalogue_gates(BY_NAME["gsm8k"], records, cand, ref, Gates(gsm8k=limits))
    return gate


def outputs(cand: str, ref: str, passed: bool = True, **kw) -> ReferenceCheckRecord:
    """The candidate's timed outputs against the reference's: what the TPOT gate counts on."""
    fields = dict(run_id="r", arm=cand, suite="long_prefix", check="long_prefix_outputs", reference=ref,
                  reference_key="k", passed=passed, detail="long_prefix_outputs: 8/8 exact" if passed else
                  "long_prefix_outputs: 2/8 exact, max drift 2.1 (limit 0.01); 6 request(s) failed", requests=8,
                  exact_matches=8 if passed else 2, first_divergence_min=None if passed else 1, max_drift=0.0,
                  nonfinite=0, drift_limit=0.01, checked_to_tokens=120_400,
                  diverged=[] if passed else ["request c1 #0 [c1]: generated token 1 differs from the reference"])
    return ReferenceCheckRecord(**{**fields, **kw})


VALID = [outputs("dcp8", "tp8"), outputs("a", "b")]  # the timing tests below: outputs matched


def lp(arm: str, conc: int, tpot_p50: float | None, **kw) -> LongPrefixRecord:
    tpot = Summary(n=8, mean=tpot_p50, p50=tpot_p50, p90=tpot_p50, p99=tpot_p50) if tpot_p50 else Summary.of([])
    fields = dict(run_id="r", arm=arm, suite="long_prefix", workload="w", prompts_sha="sha", concurrency=conc,
                  status="complete", requests=8, failed=0, ttft=Summary.of([0.1]), tpot=tpot, itl=tpot,
                  e2e=Summary.of([1.0]), kv_usage=None, gpu_memory_mib=None, samples_path="s")
    return LongPrefixRecord(**{**fields, **kw})


def gsm(arm: str, right: list[bool], request_errors: int = 0, status: str = "complete") -> Gsm8kRecord:
    k = sum(right)
    score = FilterScore(exact_match=k / len(right) if right else None, stderr=None, correct=k)
    per_q = {f: dict(enumerate(right)) for f in ("strict-match", "flexible-extract")}
    return Gsm8kRecord(run_id="r", arm=arm, suite="gsm8k", workload="w", task="gsm8k_local", data_files=None,
                       lm_eval_version="0.4.9", task_hash=None, num_fewshot=5, limit=None, n=len(right),
                       scores={"strict-match": score, "flexible-extract": score}, request_errors=request_errors,
                       invalid=0, status=status, wall_s=1.0, num_concurrent=1, samples_path=None, per_question=per_q)


def test_tpot_gate_passes_within_tolerance_and_names_the_slow_level():
    ok = gates.tpot_gate(VALID + [lp("dcp8", 1, 0.0105), lp("tp8", 1, 0.0138)], "dcp8", "tp8", TOL)  # the seed: DCP8 faster
    assert ok.passed and ok.detail == "TPOT p50 within 0.05 of tp8 at every concurrency"
    bad = gates.tpot_gate(VALID + [lp("dcp8", 1, 0.0105), lp("dcp8", 2, 0.0150), lp("tp8", 1, 0.0138), lp("tp8", 2, 0.0138)],
                          "dcp8", "tp8", TOL)
    assert not bad.passed and bad.detail == "c2: dcp8 TPOT p50 15.000 ms > tp8 13.800 ms x (1 + 0.05) = 14.490 ms"
    assert round(bad.numbers["c2_ratio"], 4) == round(0.0150 / 0.0138, 4)


def test_tpot_gate_without_long_prefix_rows_is_fail_no_data():
    r = gates.tpot_gate([gsm("dcp8", [True])], "dcp8", "tp8", TOL)
    assert not r.passed
    assert r.detail == "no data: no long_prefix record for dcp8; no data: no long_prefix record for tp8"


def test_tpot_gate_on_partial_input_is_fail_no_data():
    aborted = [lp("dcp8", 1, 0.010), lp("dcp8", 2, None, status="aborted", requests=3), lp("tp8", 1, 0.012),
               lp("tp8", 2, 0.012)]
    r = gates.tpot_gate(VALID + aborted, "dcp8", "tp8", TOL)
    assert not r.passed and r.detail == "no data: dcp8 c2 aborted after 3 request(s)"
    missing_level = gates.tpot_gate(VALID + [lp("dcp8", 1, 0.010), lp("tp8", 1, 0.012), lp("tp8", 2, 0.012)], "dcp8", "tp8", TOL)
    assert missing_level.detail == "no data: dcp8 has no c2 level"
    failed = gates.tpot_gate(VALID + [lp("dcp8", 1, 0.010, failed=8), lp("tp8", 1, 0.012)], "dcp8", "tp8", TOL)
    assert failed.detail == "no data: dcp8 c1: 8/8 request(s) failed (at most 0)"
    other = gates.tpot_gate(VALID + [lp("dcp8", 1, 0.010), lp("tp8", 1, 0.012, prompts_sha="x")], "dcp8", "tp8", TOL)
    assert not other.passed and "different prompts" in other.detail
    # a level the workload asks for that neither arm recorded is missing on both, not a level nobody wanted
    both_short = [lp("dcp8", 1, 0.010), lp("tp8", 1, 0.012)]
    assert gates.tpot_gate(VALID + both_short, "dcp8", "tp8", TOL, levels=[1]).passed
    r = gates.tpot_gate(VALID + both_short, "dcp8", "tp8", TOL, levels=[1, 2])
    assert not r.passed and r.detail == "no data: dcp8 has no c2 level; no data: tp8 has no c2 level"


def test_tpot_gate_not_enforced_still_fails_and_says_so():
    r = gates.tpot_gate(VALID + [lp("a", 1, 0.02), lp("b", 1, 0.01)], "a", "b",
                        LongPrefixGates(tpot_p50_tolerance=0.5, enforce_timing=False))
    assert not r.passed and not r.enforced and r.detail.endswith("(not enforced for this arm: gates.yaml "
                                                                 "enforce_timing false)")


def test_a_relaunched_arms_later_record_replaces_the_earlier_one():
    r = gates.tpot_gate(VALID + [lp("a", 1, None, status="aborted"), lp("a", 1, 0.01), lp("b", 1, 0.01)], "a", "b", TOL)
    assert r.passed


def test_gsm8k_gate_uses_discordant_pairs():
    ref = [i % 10 != 0 for i in range(100)]  # 90 right
    assert gsm8k_gate([gsm("dcp8", ref), gsm("tp8", ref)], "dcp8", "tp8", Gsm8kGates()).passed
    worse = [v and i >= 24 for i, v in enumerate(ref)]  # loses 1-9, 11-19, 21-23: 21 questions
    r = gsm8k_gate([gsm("dcp8", worse), gsm("tp8", ref)], "dcp8", "tp8", Gsm8kGates())
    assert not r.passed and "exact McNemar p" in r.detail
    assert r.numbers["paired"] == 100 and r.numbers["only_reference"] == 21 and r.numbers["only_candidate"] == 0
    assert gsm8k_gate([gsm("dcp8", [False] * 3 + [True]), gsm("tp8", [True] * 3 + [False])], "dcp8", "tp8",
                      Gsm8kGates()).passed  # 3 lost, 1 won: not significant
    assert gsm8k_gate([gsm("dcp8", [True] * 30), gsm("tp8", [False] * 30)], "dcp8", "tp8",
                      Gsm8kGates()).passed  # better is never a failure


def test_gsm8k_gate_with_every_request_failed_is_fail_no_data_not_pass():
    # 16/16 request errors score every question wrong; against a reference that got 1 right McNemar would pass.
    r = gsm8k_gate([gsm("cpu-smoke", [False] * 16, request_errors=16), gsm("cpu-ref", [True] + [False] * 15)],
                         "cpu-smoke", "cpu-ref", Gsm8kGates())
    assert not r.passed and r.detail == "no data: cpu-smoke: 16/16 GSM8K request(s) failed (at most 0)"


def test_gsm8k_gate_missing_aborted_or_without_per_question_results_is_fail_no_data():
    assert gsm8k_gate([gsm("a", [True])], "a", "b", Gsm8kGates()).detail == "no data: no gsm8k record for b"
    aborted = gsm8k_gate([gsm("a", [True], status="aborted"), gsm("b", [True])], "a", "b", Gsm8kGates())
    assert aborted.detail == "no data: a GSM8K aborted after 1 question(s)"
    bare = gsm("b", [True]).model_copy(update={"per_question": None})
    r = gsm8k_gate([gsm("a", [True]), bare], "a", "b", Gsm8kGates())
    assert not r.passed and "no data: b has no per-question strict-match results" in r.detail


def test_evaluate_gates_only_for_the_suites_the_run_selected():
    records = [*VALID, lp("a", 1, 0.01), lp("b", 1, 0.01)]
    assert [g.gate for g in suite_gates.evaluate_gates(records, "a", "b", Gates(), ["long_prefix"])] == ["long_prefix_tpot_p50"]
    both = suite_gates.evaluate_gates(records, "a", "b", Gates(), ["gsm8k", "long_prefix", "kv_capacity"])
    assert [(g.gate, g.passed) for g in both] == [("long_prefix_tpot_p50", True), ("gsm8k_paired_accuracy", False)]
    assert suite_gates.evaluate_gates(records, "a", None, Gates(), ["long_prefix"]) == []


def test_gsm8k_gate_states_the_smallest_drop_its_paired_questions_could_show():
    """Exact McNemar at alpha 0.05 rejects only from 6 lost questions with none won (p = 2 x 0.5^6 = 0.031): on 16
    questions where the reference got 10 right, the smallest detectable drop is 6/16 = 37.5 pt."""
    ref = [True] * 10 + [False] * 6
    r = gsm8k_gate([gsm("dcp8", ref), gsm("tp8", ref)], "dcp8", "tp8", Gsm8kGates())
    assert r.passed and r.no_signal is None
    assert "smallest detectable drop 37.5 pt (6 of 16 paired questions lost with 0 won" in r.detail
    assert (r.numbers["min_lost"], r.numbers["detectable_drop"]) == (6, 6 / 16)
    from harness.report.headline import check_lines

    assert check_lines([], "dcp8", [r]) == ["Gate gsm8k_paired_accuracy: PASS (smallest detectable drop 37.5 pt (6 of "
                                            "16 paired questions lost with 0 won, exact McNemar at alpha 0.05))"]
    lost5 = gsm8k_gate([gsm("dcp8", [False] * 5 + ref[5:]), gsm("tp8", ref)], "dcp8", "tp8", Gsm8kGates())
    lost6 = gsm8k_gate([gsm("dcp8", [False] * 6 + ref[6:]), gsm("tp8", ref)], "dcp8", "tp8", Gsm8kGates())
    assert lost5.passed and not lost6.passed  # the stated power is the gate's own: 5 lost passes, 6 fail


def test_gsm8k_gate_without_signal_passes_saying_so_and_fails_a_strict_run():
    """The embedded default: 0/16 against 0/16 (McNemar p = 1). The reference has nothing to lose, so no drop is
    detectable; the headline reads PASS (no signal: ...), and a strict run FAILS."""
    from harness.config.thresholds import for_run, load_gates
    from harness.report.headline import check_lines

    records = [gsm("cpu-smoke", [False] * 16), gsm("cpu-ref", [False] * 16)]
    loose = gsm8k_gate(records, "cpu-smoke", "cpu-ref", for_run(Gates(), False).gsm8k)
    assert loose.passed and loose.numbers["min_lost"] is None and loose.numbers["detectable_drop"] is None
    why = "no accuracy drop is detectable: cpu-ref got 0 of 16 paired questions right, and exact McNemar at alpha " \
          "0.05 needs 6 lost with 0 won"
    assert loose.no_signal == why and why in loose.detail
    assert check_lines([], "cpu-smoke", [loose]) == [f"Gate gsm8k_paired_accuracy: PASS (no signal: {why})"]
    strict = gsm8k_gate(records, "cpu-smoke", "cpu-ref", for_run(Gates(), True).gsm8k)
    assert not strict.passed and strict.no_signal is None and strict.detail.startswith(f"no signal: {why}; a strict")
    assert check_lines([], "cpu-smoke", [strict])[0].startswith("Gate gsm8k_paired_accuracy: FAIL (no signal: ")
    # the CPU pair's own section keeps it a PASS (no signal) in CI: it qualifies the pipeline, not accuracy
    shipped = gsm8k_gate(records, "cpu-smoke", "cpu-ref", for_run(load_gates("cpu-smoke"), True).gsm8k)
    assert shipped.passed and shipped.no_signal == why
    five = [True] * 5 + [False] * 11  # 5 right: even losing all 5 stays below the 6 McNemar needs
    assert gsm8k_gate([gsm("a", five), gsm("b", five)], "a", "b", Gsm8kGates()).no_signal is not None


def test_mcnemar_min_lost_is_the_exact_tests_own_threshold():
    from harness.judge.stats import mcnemar_exact_p, mcnemar_min_lost

    for c, right, alpha in [(0, 16, 0.05), (3, 100, 0.05), (20, 1200, 0.05), (0, 40, 0.01), (7, 7, 0.05)]:
        b = mcnemar_min_lost(c, right, alpha)
        if b is None:
            assert all(mcnemar_exact_p(x, c) >= alpha for x in range(c + 1, right + 1))
        else:
            assert mcnemar_exact_p(b, c) < alpha <= mcnemar_exact_p(b - 1, c)


def buffered_lp(arm: str, conc: int, **kw) -> LongPrefixRecord:
    """A level whose streams reached the client at once, as measure.long_prefix.level_fields writes it."""
    from harness.records.schema import buffered_reason

    return lp(arm, conc, None, ttft=Summary.of([]), buffered_requests=3, timing_invalid=buffered_reason(3, 4), **kw)


BUFFERED = "timing invalid (buffered stream): 3/4 requests' output arrived at once"


def test_tpot_gate_on_a_buffered_level_is_fail_no_data_with_the_reason():
    records = VALID + [buffered_lp("a", 1), lp("b", 1, 0.004)]
    r = gates.tpot_gate(records, "a", "b", LongPrefixGates(tpot_p50_tolerance=0.5))
    assert not r.passed and r.enforced and r.numbers == {} and r.detail == f"no data: a c1: {BUFFERED}"
    # the reference's buffered level leaves nothing to compare with either
    theirs = gates.tpot_gate(VALID + [lp("a", 1, 0.004), buffered_lp("b", 1)], "a", "b", TOL)
    assert not theirs.passed and theirs.detail == f"no data: b c1: {BUFFERED}"


def test_tpot_gate_on_a_buffered_level_not_enforced_says_so_with_the_reason():
    records = VALID + [buffered_lp("a", 1), lp("b", 1, 0.004)]
    r = gates.tpot_gate(records, "a", "b", LongPrefixGates(tpot_p50_tolerance=0.5, enforce_timing=False))
    assert not r.passed and not r.enforced
    assert r.detail == f"no data: a c1: {BUFFERED} (not enforced for this arm: gates.yaml enforce_timing false)"
    # missing input stays enforced, and invalid outputs still open the detail
    aborted = gates.tpot_gate(records + [lp("a", 2, None, status="aborted", requests=2), lp("b", 2, 0.004)], "a", "b",
                              LongPrefixGates(tpot_p50_tolerance=0.5, enforce_timing=False))
    assert aborted.enforced and aborted.detail.startswith("no data: a c2 aborted after 2 request(s); no data: a c1: ")
    wrong = gates.tpot_gate([outputs("a", "b", passed=False), buffered_lp("a", 1), lp("b", 1, 0.004)], "a", "b",
                            LongPrefixGates(tpot_p50_tolerance=0.5, enforce_timing=False))
    assert wrong.enforced and wrong.detail.startswith("outputs invalid: ") and BUFFERED in wrong.detail


def test_tpot_gate_reads_an_older_records_buffered_requests_from_its_tpots():
    # written before buffered_requests: night 05's c1 as recorded then, TPOT p50 0.018 ms from 3 buffered requests
    old = lp("a", 1, 0.0000188, tpot_samples_s=[0.0000187, 0.0000189, 0.0000201, 0.0023902], requests=4)
    assert old.buffered_requests == 3 and old.timing_invalid == BUFFERED
    r = gates.tpot_gate(VALID + [old, lp("b", 1, 0.004)], "a", "b", TOL)
    assert not r.passed and r.numbers == {} and r.detail == f"no data: a c1: {BUFFERED}"
    clean = lp("a", 1, 0.0041, tpot_samples_s=[0.0040, 0.0041, 0.0042, 0.0043], requests=4)
    assert clean.buffered_requests == 0 and clean.timing_invalid is None
    assert gates.tpot_gate(VALID + [clean, lp("b", 1, 0.004)], "a", "b", TOL).passed
