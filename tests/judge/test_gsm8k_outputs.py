"""GSM8K's answers compared token by token (harness/judge/gsm8k_outputs.py): identical answers pass, a divergence is
placed at its first differing token and fails beyond the arm's allowance, nothing compared is no data."""

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
