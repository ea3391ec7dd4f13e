"""The run's exit code and verdict word, from pytest's code, the baseline regressions and the pair gates (pure)."""

from __future__ import annotations

from harness.judge.gates import GateResult


def run_exit_code(pytest_code: int | None, regressions: list[str], gates: list[GateResult] = ()) -> int | None:
    """pytest's code (a failed gate is a failed test); a baseline regression, or an enforced gate that fails (no data
    included: the verdict agrees with the Gates table), turns a pass into 1. None: the run never recorded one."""
    if pytest_code == 0 and (regressions or any(not g.passed and g.enforced for g in gates)):
        return 1
    return pytest_code


def run_verdict(exit_code: int | None) -> str:
    if exit_code is None:
        return "INCOMPLETE"
    if exit_code >= 128:
        return "INTERRUPTED"
    return "PASSED" if exit_code == 0 else "FAILED"
