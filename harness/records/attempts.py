"""Resumed runs: which records are current, and which tests are done (pure functions of records).

A run resumed with `--resume` appends to the same results.jsonl under a higher `attempt`. A test that ran again
supersedes every record its earlier attempt wrote (a level aborted by the kill, its outcome), so tables and gates
see each test once. Records not tied to a test (server launches, old records) are grouped by kind and arm.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.records.meaning import of_kind
from harness.records.schema import OutcomeRecord, Record


def group_of(record: Record) -> tuple[str, ...]:
    return ("test", record.test) if record.test else ("arm", record.kind, record.arm)


def current_records(records: Iterable[Record]) -> list[Record]:
    """Each group's records from its latest attempt only, in file order."""
    records = list(records)
    latest: dict[tuple[str, ...], int] = {}
    for r in records:
        key = group_of(r)
        latest[key] = max(latest.get(key, r.attempt), r.attempt)
    return [r for r in records if r.attempt == latest[group_of(r)]]


def next_attempt(records: Iterable[Record]) -> int:
    return max((r.attempt for r in records), default=-1) + 1


def done_tests(records: Iterable[Record]) -> set[str]:
    """Test node ids with a verdict (passed, failed, skipped or error): a resumed run does not run them again. A test
    cut short by the interrupt has no outcome record, so it runs again."""
    return {r.test for r in of_kind(current_records(records), OutcomeRecord)}


def failed_tests(records: Iterable[Record]) -> list[str]:
    """Tests whose current verdict is failed or error: a resumed run fails when an earlier attempt's test did."""
    return sorted({r.test for r in of_kind(current_records(records), OutcomeRecord)
                   if r.outcome in ("failed", "error")})


def resumed_exit_code(pytest_code: int, records: Iterable[Record]) -> int:
    """A resumed run's exit code covers every attempt: 1 when any current verdict failed; pytest's 'no tests ran'
    (5: everything was done already) is 0 then. Interrupts (>= 128) stay as they are."""
    if pytest_code >= 128:
        return pytest_code
    if failed_tests(records):
        return max(pytest_code, 1) if pytest_code != 5 else 1
    return 0 if pytest_code == 5 else pytest_code
