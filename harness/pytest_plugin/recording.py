"""Recording into results.jsonl: the `record` fixture suites write typed records with, one ServerRecord per
launch, and one OutcomeRecord per test (its verdict and failure text, for the tables and JUnit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.arms import Arm
from harness.plan.redact import redact_argv, redact_env
from harness.pytest_plugin.parallel import test_id
from harness.records.schema import OutcomeRecord, ServerRecord
from harness.serve.launch import LiveServer


def server_up(run_id: str, live: LiveServer) -> ServerRecord:
    node = live.plan.nodes[0]
    return ServerRecord(run_id=run_id, arm=live.arm.name, suite="server", status="up", base_url=live.info.base_url,
                        startup_s=round(live.info.startup_s, 2), vllm_version=live.info.vllm_version,
                        backends=live.info.backends, expected_backend=live.arm.attention.expected,
                        argv=redact_argv(node.argv), env=redact_env(node.env), log_path=str(live.server.log_path))


def server_failed(run_id: str, arm: Arm, reason: str, log_path: Path) -> ServerRecord:
    return ServerRecord(run_id=run_id, arm=arm.name, suite="server", status="failed", reason=reason,
                        expected_backend=arm.attention.expected, log_path=str(log_path))


def outcome_record(item: pytest.Item, report: pytest.TestReport, run_id: str, arm: str) -> OutcomeRecord:
    """A suite test's verdict: the arm it ran for (HarnessSession.arm_of) and the failure text."""
    outcome = report.outcome if report.when == "call" else ("skipped" if report.skipped else "error")
    return OutcomeRecord(run_id=run_id, arm=arm, suite=item.module.__name__.removeprefix("test_"),
                         test=test_id(item.nodeid),
                         outcome=outcome, message="" if report.passed else failure_text(report),
                         duration_s=round(report.duration, 3))


def failure_text(report: pytest.TestReport) -> str:
    """The failure text, or a skip's reason alone (its longrepr is a (path, line, "Skipped: why") tuple): the
    outcome already says skipped."""
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longreprtext)[-4000:]
