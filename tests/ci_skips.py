"""Under CI (CI=true), a skip that tests/ci_allowed_skips.yaml does not list fails the run: a test that skips in CI has
tested nothing, and a green run must not hide it. Loaded by tests/conftest.py (or `-p ci_skips` with tests/ on the
path); HARNESS_CI_SKIP_ALLOWLIST points at another allowlist (the plugin's own tests use it)."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ALLOWLIST = Path(__file__).with_name("ci_allowed_skips.yaml")


@dataclass(frozen=True)
class Allowed:
    test: str  # a node id, fnmatch-style ("tests/x.py::test_y*")
    reason: str  # a substring of the skip's reason
    why: str


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def load_allowlist(path: Path) -> list[Allowed]:
    """Entries of the allowlist; pytest.UsageError naming the file and entry when one lacks a field."""
    try:
        raw = yaml.safe_load(path.read_text()) or []
    except (OSError, yaml.YAMLError) as e:
        raise pytest.UsageError(f"{path}: cannot read the CI skip allowlist: {e}") from None
    if not isinstance(raw, list):
        raise pytest.UsageError(f"{path}: the CI skip allowlist must be a YAML list of {{test, reason, why}} entries")
    entries, fields = [], {"test", "reason", "why"}
    for i, e in enumerate(raw, 1):
        e = e if isinstance(e, dict) else {}
        missing = sorted(k for k in fields if not str(e.get(k) or "").strip())
        if missing or set(e) - fields:
            raise pytest.UsageError(
                f"{path}: entry {i} needs exactly the fields test, reason and why (why: the comment saying why this "
                f"skip is acceptable in CI); missing {missing}, unknown {sorted(set(e) - fields)}")
        entries.append(Allowed(str(e["test"]), str(e["reason"]), str(e["why"])))
    return entries


def skip_reason(longrepr) -> str:
    # A skip's longrepr is (path, lineno, "Skipped: <reason>"); anything else is shown whole.
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def allowed(nodeid: str, reason: str, entries: list[Allowed]) -> Allowed | None:
    return next((e for e in entries if fnmatch.fnmatchcase(nodeid, e.test) and e.reason in reason), None)


def unexpected_skip_message(nodeid: str, reason: str, allowlist: Path) -> str:
    return (f"unexpected skip under CI=true: {nodeid}: {reason}\n"
            f"A skipped test tested nothing. Make it run in CI, or add it to {allowlist} with a `why`.")


def _fail_if_unexpected(config, report) -> None:
    entries = config.stash.get(_ENTRIES, None)
    if entries is None or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report.longrepr)
    if allowed(report.nodeid, reason, entries) is None:
        report.outcome = "failed"
        report.longrepr = unexpected_skip_message(report.nodeid, reason, config.stash[_PATH])


_ENTRIES = pytest.StashKey[list]()
_PATH = pytest.StashKey[Path]()


def pytest_configure(config) -> None:
    if in_ci():
        path = Path(os.environ.get("HARNESS_CI_SKIP_ALLOWLIST") or ALLOWLIST)
        config.stash[_PATH] = path
        config.stash[_ENTRIES] = load_allowlist(path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_if_unexpected(item.config, outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # A module-level skip (pytest.skip(allow_module_level=True), importorskip at import) is a collect report.
    outcome = yield
    _fail_if_unexpected(collector.config, outcome.get_result())
