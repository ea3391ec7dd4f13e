"""Resumed runs: a later attempt of a test supersedes the earlier one's records; done tests are those with a verdict."""

from harness.records.attempts import current_records, done_tests, next_attempt, resumed_exit_code
from harness.records.schema import KvCapacityRecord, OutcomeRecord, ServerRecord

T_KV = "suites/test_kv_capacity.py::test_kv_capacity[cpu-ref]"
T_LP = "suites/test_long_prefix.py::test_long_prefix[cpu-ref]"


def kv(tokens: int, attempt: int, test: str = T_KV) -> KvCapacityRecord:
    return KvCapacityRecord(run_id="r", arm="cpu-ref", suite="kv_capacity", device="CPU", tokens=tokens,
                            gib_per_worker=1.0, tp=1, dcp=1, source_line="", attempt=attempt, test=test)


def outcome(test: str, attempt: int, result: str = "passed") -> OutcomeRecord:
    return OutcomeRecord(run_id="r", arm="cpu-ref", suite="x", test=test, outcome=result, attempt=attempt)


def server(arm: str, attempt: int) -> ServerRecord:
    return ServerRecord(run_id="r", arm=arm, suite="server", status="up", attempt=attempt)


def test_a_rerun_test_keeps_only_its_latest_attempt():
    records = [server("cpu-ref", 0), kv(1, 0), server("cpu-ref", 1), kv(2, 1), outcome(T_KV, 1)]
    current = current_records(records)
    assert [r.tokens for r in current if isinstance(r, KvCapacityRecord)] == [2]
    assert [r.attempt for r in current if isinstance(r, ServerRecord)] == [1]


def test_a_test_not_rerun_keeps_its_records_from_the_first_attempt():
    records = [server("cpu-smoke", 0), kv(1, 0), outcome(T_KV, 0), server("cpu-ref", 1), outcome(T_LP, 1)]
    assert current_records(records) == records


def test_old_records_without_attempt_or_test_are_all_current():
    records = [kv(1, 0, test=None), kv(2, 0, test=None)]
    assert current_records(records) == records


def test_done_tests_are_those_with_an_outcome_of_any_verdict():
    records = [kv(1, 0), outcome(T_KV, 0, "failed"), kv(1, 0, test=T_LP)]  # T_LP interrupted: no outcome
    assert done_tests(records) == {T_KV}


def test_next_attempt_counts_from_the_file():
    assert next_attempt([]) == 0
    assert next_attempt([kv(1, 0), kv(1, 2)]) == 3


def test_a_resumed_run_fails_when_an_earlier_attempts_test_failed():
    earlier_fail = [outcome(T_KV, 0, "failed"), outcome(T_LP, 1)]
    assert resumed_exit_code(0, earlier_fail) == 1
    assert resumed_exit_code(5, earlier_fail) == 1  # nothing left to run, but the run failed
    assert resumed_exit_code(5, [outcome(T_KV, 0)]) == 0  # nothing left to run, and it all passed
    assert resumed_exit_code(143, earlier_fail) == 143  # interrupted again


def test_a_test_that_passed_when_run_again_no_longer_fails_the_run():
    assert resumed_exit_code(0, [outcome(T_LP, 0, "error"), outcome(T_LP, 1, "passed")]) == 0
