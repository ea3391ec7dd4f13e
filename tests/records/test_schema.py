"""The schema's own parts: the record union and the summaries records carry."""

from harness.records.schema import KNOWN_KINDS, Usage, per_question_of


def test_known_kinds_are_the_record_union():
    assert KNOWN_KINDS == {"server", "kv_capacity", "long_prefix", "cold_start", "gsm8k", "ruler", "gate",
                           "reference_check",
                           "long_context", "dcp_ops", "spec_decode", "degeneration", "outcome", "capacity", "metric"}


def test_usage_of_no_points_is_none_not_zero():
    assert Usage.of([]) is None
    assert Usage.of([0.25, 0.5]) == Usage(mean=0.375, peak=0.5, n=2)


def test_per_question_from_lm_evals_sample_rows():
    rows = [{"doc_id": 0, "filter": "strict-match", "exact_match": 1.0},
            {"doc_id": 0, "filter": "flexible-extract", "exact_match": 0.0}, {"note": "no doc id"}]
    assert per_question_of(rows) == {"strict-match": {0: True}, "flexible-extract": {0: False}}
