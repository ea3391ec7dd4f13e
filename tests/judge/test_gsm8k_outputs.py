"""GSM8K's answers compared token by token (harness/judge/gsm8k_outputs.py): identical answers pass, a divergence is
placed at its first differing token and fails beyond the arm's allowance, nothing compared is no data."""

import pytest

from harness.judge.gsm8k_outputs import answers_verdict, compare_answers


def words(text: str) -> list[int]:  # a tokenizer: one token per word
    return [hash(w) % 1000 for w in text.split()]


def test_identical_answers_pass_and_a_missing_answer_is_never_a_match():
    cs = compare_answers({1: "a b c"}, {1: "a b c"}, words)
    passed, detail, lines = answers_verdict(cs, 0)
    assert passed and lines == [] and "1/1 answers identical" in detail
    # a request error leaves a question unanswered on one side: it diverges, at token 0
    cs = compare_answers({1: "a b c", 2: "x"}, {1: "a b c", 3: "y"}, words)
    assert [(c.request, c.exact, c.first_divergence) for c in cs] == [
        ("question 1", True, None), ("question 2 (no reference answer)", False, 0),
        ("question 3 (no candidate answer)", False, 0)]
    assert not answers_verdict(cs, 1)[0] and answers_verdict(cs, 2)[0]


def test_a_divergence_is_placed_at_its_first_token_and_fails_beyond_the_allowance():
    cs = compare_answers({1: "a b c d", 2: "a b", 3: "q"}, {1: "a b x d", 2: "a b c", 3: "q"}, words)
    firsts = {c.request: c.first_divergence for c in cs}
    assert firsts == {"question 1": 2, "question 2": 2, "question 3": None}  # a shorter answer ends where it ends
    passed, detail, lines = answers_verdict(cs, 0)
    assert not passed and len(lines) == 2 and "first divergence at token 2" in detail
    assert answers_verdict(cs, 2)[0]


def test_nothing_compared_is_no_data_and_no_limit_is_no_verdict():
    passed, detail, _ = answers_verdict(compare_answers({}, {}, words), 5)
    assert not passed and "no data" in detail
    passed, detail, _ = answers_verdict(compare_answers({1: "a"}, {1: "a"}, words), None)
    assert not passed and "may differ" not in detail  # the skip reason quotes the numbers, no limit


def test_without_a_limit_an_arm_that_requires_calibration_fails_not_measured_and_others_are_not_judged():
    from harness.judge.gsm8k_outputs import without_limit

    _, detail, _ = answers_verdict(compare_answers({1: "a b", 2: "c"}, {1: "a x", 2: "c"}, words), None)
    fails, sentence = without_limit("gpu-mla", detail, required=True)
    assert fails and sentence.startswith("gsm8k_outputs: not measured for this arm: gates.yaml arms.gpu-mla.gsm8k."
                                         "max_diverged_answers is unset (gsm8k_outputs: 1/2 answers identical")
    fails, sentence = without_limit("cpu-spec", detail, required=False)
    assert not fails and "not judged on arm 'cpu-spec'" in sentence and "1/2 answers identical" in sentence


def test_every_gpu_candidate_arm_fails_its_unmeasured_gsm8k_outputs_and_the_cpu_pair_is_judged_at_zero():
    """The real gates.yaml: a GPU candidate (one with a reference) requires a calibration and has no measured
    allowance, so its gsm8k_outputs reads FAIL "not measured for this arm", never a skip; cpu-smoke's is 0."""
    from harness.config.arms import known_arms, load_arm
    from harness.config.thresholds import load_gates
    from harness.judge.gsm8k_outputs import without_limit

    candidates = [a for a in known_arms() if a.startswith("gpu-") and load_arm(a, geometry=False).reference]
    assert "gpu-mla" in candidates and "gpu-dcp2" in candidates
    for arm in candidates:
        gates = load_gates(arm)
        assert gates.gsm8k.max_diverged_answers is None, arm  # nothing measured on a GPU yet (docs/gates.md)
        assert without_limit(arm, "numbers", gates.reference_checks.require_floor)[0], arm
    assert load_gates("cpu-smoke").gsm8k.max_diverged_answers == 0


def test_a_derived_allowance_holds_one_more_clean_run_and_catches_a_build_that_diverges_far_more():
    """diverged_answers_limit over 400 seeded simulated K = 5 calibrations of 100 questions at clean rates of 2-20 %:
    with a fixed rate (binomial) or a rate that moves run to run (beta, concentration 200: sd ~ 1 point at 2 %), one
    more clean run exceeds the limit at most 1 % of the time (measured 0.25-0.5 %); with a rate whose run-to-run sd is
    about its mean (concentration 50: heavy, skewed) at most 3 % (measured 0.5-2.75 %). Power: 25 more diverged
    answers are caught 74-100 % of the time (45-98 % under the heavy spread); a doubled rate only 3-64 %, which
    docs/gates.md states: the count is a coarse check."""
    import numpy as np

    from harness.judge.gsm8k_outputs import diverged_answers_limit

    assert diverged_answers_limit([0, 0, 0, 0, 0], 100)[0] == 3  # 0 in 500 cannot exclude a rate of 0.6 %
    assert diverged_answers_limit([18, 18, 18, 18, 18], 100)[0] >= 18
    for concentration, allowed, power in ((None, 0.01, 0.85), (200, 0.01, 0.7), (50, 0.03, 0.4)):
        for rate in (0.02, 0.05, 0.1, 0.2):
            over = caught = 0
            for seed in range(400):
                rng = np.random.default_rng(seed)
                rates = (np.full(7, rate) if concentration is None else
                         rng.beta(rate * concentration, (1 - rate) * concentration, size=7))
                counts = [int(rng.binomial(100, r)) for r in rates]
                limit, _ = diverged_answers_limit(counts[:5], 100)
                over += counts[5] > limit
                caught += min(100, int(rng.binomial(100, rates[6])) + 25) > limit
            assert over / 400 <= allowed, (concentration, rate, over)
            assert caught / 400 >= power, (concentration, rate, caught)
    with pytest.raises(ValueError):
        diverged_answers_limit([3], 100)
