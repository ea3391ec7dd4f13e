import pytest

from harness.judge.gates import GateResult
from harness.judge.verdict import run_exit_code, run_verdict


@pytest.mark.parametrize(("pytest_code", "regressions", "expected"),
                         [(0, [], 0), (0, ["TPOT +30%"], 1), (1, [], 1), (130, ["x"], 130), (None, [], None)])
def test_final_exit_code(pytest_code, regressions, expected):
    assert run_exit_code(pytest_code, regressions) == expected


def gate(passed: bool, enforced: bool) -> GateResult:
    return GateResult("g", "gsm8k", "cand", "ref", passed, "detail", enforced=enforced)


@pytest.mark.parametrize(("pytest_code", "gates", "expected"),
                         [(0, [gate(False, True)], 1), (0, [gate(False, False)], 0), (0, [gate(True, True)], 0),
                          (143, [gate(False, True)], 143), (2, [gate(False, True)], 2)])
def test_an_enforced_failing_gate_fails_a_passing_run(pytest_code, gates, expected):
    assert run_exit_code(pytest_code, [], gates) == expected


@pytest.mark.parametrize(("code", "word"), [(None, "INCOMPLETE"), (0, "PASSED"), (1, "FAILED"), (130, "INTERRUPTED")])
def test_run_verdict(code, word):
    assert run_verdict(code) == word
