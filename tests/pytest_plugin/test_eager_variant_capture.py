"""The candidate's eager variant is captured with the reference's outputs, before the candidate starts, by whichever
capture fixture runs first, and only where a collected test compares with it (graph_replay)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from harness.pytest_plugin import fixtures, grouping
from harness.pytest_plugin.session import SESSION_KEY


class Session(SimpleNamespace):
    # every prompt set has one prompt here (a set without any returns before any capture)
    references = SimpleNamespace(prompt_set=lambda name, candidate: (SimpleNamespace(all=lambda: ["p"]), None))

    def arm(self, name):
        return SimpleNamespace(eager_variant={"gpu-mla-120k": "gpu-mla-120k-eager"}.get(name))


def under_test(candidate: str, reference: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(arm=candidate, candidate=candidate, reference=reference)


def captured_by(session, candidate: str, monkeypatch) -> list[str]:
    seen = []
    monkeypatch.setattr(fixtures, "_stored", lambda s, test, name, **kw: seen.append(name))
    fixtures.capture_eager_variant(session, under_test(candidate))
    return seen


def test_the_variant_is_captured_when_a_collected_test_compares_with_it(monkeypatch):
    session = Session(eager_needed={"gpu-mla-120k"})
    assert captured_by(session, "gpu-mla-120k", monkeypatch) == ["gpu-mla-120k-eager"]


def test_no_eager_server_without_graph_replay_or_without_a_variant(monkeypatch):
    assert captured_by(Session(eager_needed=set()), "gpu-mla-120k", monkeypatch) == []
    assert captured_by(Session(eager_needed={"cpu-smoke"}), "cpu-smoke", monkeypatch) == []


def item(nodeid: str, *fixturenames: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, path=Path("/repo/suites") / nodeid.split("::")[0], fixturenames=fixturenames)


def test_collection_marks_the_candidates_whose_tests_need_their_eager_variant():
    session = SimpleNamespace(collected={}, outputs_needed={}, eager_needed=set(),
                              arm_of=lambda nodeid: "gpu-mla-120k",
                              run=SimpleNamespace(arm_set=SimpleNamespace(reference_of=lambda arm: "gpu-mla-120k-ref")))
    config = SimpleNamespace(stash={SESSION_KEY: session})
    grouping.pytest_collection_modifyitems(config, [item("test_long_context.py::t", "long_context_outputs")])
    assert session.eager_needed == set()
    grouping.pytest_collection_modifyitems(
        config, [item("test_graph_replay.py::t", "reference_outputs", "eager_outputs", "candidate")])
    assert session.eager_needed == {"gpu-mla-120k"}


def test_every_capture_fixture_captures_the_variant_after_the_references_outputs(monkeypatch):
    # The long_context grid's tests run before graph_replay's on the 120k arms; when only reference_outputs captured
    # the variant, graph_replay stopped the candidate to capture it (a second start on the H200, 2026-12-03b).
    from harness.refcheck.prompt_sets.registry import prompt_sets

    session = Session(eager_needed={"gpu-mla-120k"})
    assert {"reference_outputs", "long_context_outputs", "coverage_outputs"} <= {p.fixture for p in prompt_sets().values()}
    for fixture in (getattr(fixtures, p.fixture) for p in prompt_sets().values()):
        seen: list[str] = []
        monkeypatch.setattr(fixtures, "_stored", lambda s, test, name, seen=seen, **kw: seen.append(name))
        fixture.__wrapped__(session, under_test("gpu-mla-120k", "gpu-mla-120k-ref"))  # as pytest calls it
        assert seen == ["gpu-mla-120k-ref", "gpu-mla-120k-eager"], fixture.__name__
