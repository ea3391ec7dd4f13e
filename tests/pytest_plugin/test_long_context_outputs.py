"""The long_context grid's reference outputs go through the same store and capture path as the reference checks':
their own fixture, captured before the candidate starts, their own key, their own refresh marker."""

from __future__ import annotations

from types import SimpleNamespace


def test_the_grid_fixture_is_captured_first_and_names_its_prompt_set():
    from harness.pytest_plugin.grouping import REFERENCE_FIRST, needs_outputs, phase, prompt_sets

    grid = SimpleNamespace(fixturenames=["long_context_outputs", "candidate"])
    checks = SimpleNamespace(fixturenames=["reference_outputs", "eager_outputs", "candidate"])
    assert "long_context_outputs" in REFERENCE_FIRST and needs_outputs(grid)
    assert phase(grid) == 0, "serial: captured before the candidate's server starts"
    assert prompt_sets(grid) == {"long_context"} and prompt_sets(checks) == {"reference_checks"}


def test_each_prompt_set_has_its_own_key_and_refresh_marker(tmp_path, monkeypatch):
    from startedruns import shipped

    from harness.pytest_plugin import references
    from harness.pytest_plugin.session import HarnessSession

    seen = {}

    def load(key, arm, prompts, directory):
        seen[type(prompts).__name__] = key.meta["prompt_set_sha"]
        return None

    monkeypatch.setattr(references.store, "load", load)
    monkeypatch.setattr(references, "installed_vllm_version", lambda python: "0.0-test")
    refs = HarnessSession(shipped(tmp_path / "run", ["cpu-smoke"], parallel=True)).references
    assert refs.outputs("cpu-ref", "cpu-smoke", capture_missing=False) is None
    assert refs.outputs("cpu-ref", "cpu-smoke", capture_missing=False, which="long_context") is None
    grid, _ = refs.prompt_set("long_context", "cpu-smoke")
    checks, _ = refs.prompt_set("reference_checks", "cpu-smoke")
    assert seen == {"CheckPrompts": checks.fingerprint(), "LongContextPrompts": grid.fingerprint()}
    assert references.refreshed_marker(tmp_path, "cpu-ref").name == "cpu-ref.refreshed"
    assert references.refreshed_marker(tmp_path, "cpu-ref", "long_context").name == "cpu-ref.long_context.refreshed"
