"""Parallel runs' collection: each suite test joins its arm's xdist group (before xdist reads the marks, hence a
module of its own with a tryfirst hook), and the session learns what each arm runs per suite."""

from __future__ import annotations

import pytest

from harness.pytest_plugin.session import SESSION_KEY

REFERENCE_FIRST = ("reference_outputs", "eager_outputs")


def item_arm(item: pytest.Item, candidate: str) -> str:
    """The arm a suite test belongs to: its `served_arm`, else the candidate (comparisons, checks, op suite)."""
    spec = getattr(item, "callspec", None)
    return spec.params.get("served_arm", candidate) if spec else candidate


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parallel runs: every suite test joins its arm's xdist group (before xdist reads the marks), and the session
    learns which tests each arm runs per suite, and whether any test needs stored reference outputs."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.options.parallel:
        return
    for item in items:
        if item.path.parent.name != "suites":
            continue
        arm = item_arm(item, session.candidate_name)
        item.add_marker(pytest.mark.xdist_group(arm))
        session.collected.setdefault(item.nodeid.split("::")[0], {}).setdefault(arm, []).append(item.nodeid)
        if any(f in getattr(item, "fixturenames", ()) for f in REFERENCE_FIRST):
            session.needs_reference_outputs = True


