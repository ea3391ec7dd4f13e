"""The RULER gate from plain records: paired exact McNemar pooled and per length; missing, aborted or partial input
on either arm, or different samples, reads FAIL "no data"."""

from harness.config.suites import BY_NAME
from harness.config.thresholds import Gates, RulerGates
from harness.judge.accuracy_gate import by_length
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.suite_gates import evaluate_gates, gated_suites
from harness.records.schema import RulerCell, RulerRecord

LIMITS = RulerGates()
TASKS = ("niah_single_1", "ruler_vt")


def ruler_gate(records: list, cand: str, ref: str, limits: RulerGates):
    """RULER's gate, judged through its catalogue entry (an AccuracyGate) as its test and the report judge it."""
    (gate,) = catalogue_gates(BY_NAME["ruler"], records, cand, ref, Gates(ruler=limits))
    return gate


def ruler(arm: str, right: dict[int, list[bool]], **kw) -> RulerRecord:
    """right: length -> correctness of samples 0..k-1 of every task."""
    per_sample = {f"{t}@{n}#{i}": ok for t in TASKS for n, oks in right.items() for i, ok in enumerate(oks)}
    cells = [RulerCell(task=t, length=n, n=len(oks), correct=sum(oks), score=sum(oks) / len(oks))
             for t in TASKS for n, oks in right.items()]
    fields = dict(run_id="r", arm=arm, suite="ruler", workload="ruler_cpu", tasks=list(TASKS),
                  max_seq_lengths=sorted(right), limit=max(len(v) for v in right.values()), tokenizer="tok",
                  data_sha="sha256:abc", lm_eval_version="0.4.13", n=len(per_sample), cells=cells, request_errors=0,
                  status="complete", wall_s=1.0, num_concurrent=4, samples_path="s", per_sample=per_sample)
    return RulerRecord(**{**fields, **kw})


def test_equal_arms_pass_and_state_the_smallest_drop_they_could_detect():
    right = {1024: [True, False] * 6, 4032: [True] * 12}  # the reference gets 36 of 48 right
    g = ruler_gate([ruler("cand", right), ruler("ref", right)], "cand", "ref", LIMITS)
    assert g.passed, g.detail
    # alpha 0.05 / 3 tests: 7 lost with none won is the fewest the exact test rejects (p = 2 x 0.5^7 = 0.0156)
    power = "smallest detectable drop 14.6 pt (7 of 48 paired RULER samples lost with 0 won, exact McNemar at alpha 0.0167)"
    assert g.detail == f"48 paired RULER samples over 2 length(s): 0 only ref right, 0 only cand right (p = 1); {power}"
    assert g.power == power and g.no_signal is None
    assert g.numbers["paired"] == 48 and g.numbers["min_lost"] == 7 and g.numbers["first_failing_length"] is None


def test_a_reference_that_finds_nothing_gives_no_signal_and_a_strict_run_fails():
    # The tiny model on CPU: 0/48 against 0/48. Nothing could be lost, so nothing could fail.
    nothing = {1024: [False] * 12, 4032: [False] * 12}
    records = [ruler("cand", nothing), ruler("ref", nothing)]
    g = ruler_gate(records, "cand", "ref", RulerGates(require_signal=False))
    assert g.passed and g.power is None
    assert g.no_signal == ("no accuracy drop is detectable: ref got 0 of 48 paired RULER samples right, and exact "
                           "McNemar at alpha 0.0167 needs 7 lost with 0 won")
    strict = ruler_gate(records, "cand", "ref", RulerGates(require_signal=True))
    assert not strict.passed and strict.detail.startswith("no signal: no accuracy drop is detectable")
    assert "gates.yaml ruler.require_signal: false" in strict.detail


def test_a_fault_at_the_long_length_fails_and_names_it():
    # Planted: the candidate loses every sample at 4032 tokens that the reference got right; 1024 is untouched.
    ref = {1024: [True] * 12, 4032: [True] * 12}
    cand = {1024: [True] * 12, 4032: [False] * 12}
    g = ruler_gate([ruler("cand", cand), ruler("ref", ref)], "cand", "ref", LIMITS)
    assert not g.passed
    assert "at 4032 tokens 24 of 24 samples only ref got right vs 0 only cand" in g.detail
    assert g.detail.endswith("first failing length 4032")
    assert g.numbers["first_failing_length"] == 4032 and g.numbers["only_reference"] == 24


def test_a_better_candidate_or_a_small_loss_passes():
    ref = {1024: [False] * 12}
    assert ruler_gate([ruler("cand", {1024: [True] * 12}), ruler("ref", ref)], "cand", "ref",
                      RulerGates(require_signal=False)).passed
    few = {1024: [False] * 2 + [True] * 10}  # 4 samples lost (2 per task): below what the test can call a drop
    g = ruler_gate([ruler("cand", few), ruler("ref", {1024: [True] * 12})], "cand", "ref", LIMITS)
    assert g.passed and "4 only ref right, 0 only cand right" in g.detail


def test_missing_aborted_or_partial_input_is_fail_no_data():
    right = {1024: [True] * 4}
    r = ruler_gate([ruler("ref", right)], "cand", "ref", LIMITS)
    assert not r.passed and r.detail == "no data: no ruler record for cand"
    r = ruler_gate([], "cand", "ref", LIMITS)
    assert r.detail == "no data: no ruler record for cand; no data: no ruler record for ref"
    aborted = ruler("cand", right, status="aborted", reason="lm-eval failed: ValueError: boom\nmore")
    r = ruler_gate([aborted, ruler("ref", right)], "cand", "ref", LIMITS)
    assert r.detail == "no data: cand RULER aborted after 8 sample(s): lm-eval failed: ValueError: boom"
    errors = ruler("ref", right, request_errors=3)
    r = ruler_gate([ruler("cand", right), errors], "cand", "ref", LIMITS)
    assert not r.passed and r.detail == "no data: ref: 3/8 RULER request(s) failed (at most 0)"
    assert ruler_gate([ruler("cand", right), errors], "cand", "ref", RulerGates(max_request_errors=3)).passed
    empty = ruler("cand", right, n=0, per_sample={})
    assert ruler_gate([empty, ruler("ref", right)], "cand", "ref", LIMITS).detail == \
        "no data: cand answered no RULER sample"


def test_different_samples_are_no_data_not_a_comparison():
    right = {1024: [True] * 4}
    other = ruler("ref", right, data_sha="sha256:def")
    r = ruler_gate([ruler("cand", right), other], "cand", "ref", LIMITS)
    assert not r.passed and r.detail.startswith("no data: the two arms were sent different RULER samples")
    short = ruler("ref", {1024: [True] * 3})
    r = ruler_gate([ruler("cand", right), short], "cand", "ref", LIMITS)
    assert r.detail == "no data: 2 RULER sample(s) answered by one arm only (e.g. niah_single_1@1024#3)"


def test_a_resumed_arms_later_record_replaces_the_earlier_one():
    right = {1024: [True] * 12}
    records = [ruler("cand", right, status="aborted"), ruler("ref", right), ruler("cand", right)]
    assert ruler_gate(records, "cand", "ref", LIMITS).passed


def test_registered_with_the_suite_gates():
    right = {1024: [True] * 4}
    records = [ruler("cand", right), ruler("ref", right)]
    assert gated_suites(records) == ["ruler"]
    (g,) = evaluate_gates(records, "cand", "ref", Gates(), ["ruler"])
    assert g.gate == "ruler_paired_accuracy" and g.suite == "ruler" and g.passed
    (g,) = evaluate_gates([], "cand", "ref", Gates(), ["ruler"])
    assert not g.passed and g.detail.startswith("no data")


def test_by_length_splits_on_the_sample_key():
    assert by_length({"ruler_vt@1024#0": True, "niah_single_1@4032#7": False}) == {
        1024: {"ruler_vt@1024#0": True}, 4032: {"niah_single_1@4032#7": False}}


def test_ruler_runs_when_named_not_by_default():
    from harness.config.suites import all_suites, named_only, parse_suites

    assert "ruler" in all_suites() and "ruler" in named_only()
    assert "ruler" not in parse_suites(None) and "gsm8k" in parse_suites(None)
    assert parse_suites("gsm8k,ruler") == ["gsm8k", "ruler"]


def test_a_strict_run_resolves_require_signal_unless_the_arm_sets_it():
    from harness.config.thresholds import for_run, load_gates

    assert for_run(Gates(), strict=True).ruler.require_signal is True
    assert for_run(Gates(), strict=False).ruler.require_signal is False
    assert for_run(load_gates("cpu-smoke"), strict=True).ruler.require_signal is False  # the CPU pair: pipeline only
    assert for_run(load_gates("dcp8"), strict=True).ruler.require_signal is True
