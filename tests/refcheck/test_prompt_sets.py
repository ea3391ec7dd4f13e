"""The prompt-set registry (harness/refcheck/prompt_sets/registry.py): every reference-check suite of the catalogue reaches its
prompts, its workload model, its arm field, its fixture and its capture through its catalogue entry alone."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.config.errors import ConfigError
from harness.config.suites import SUITES, refcheck_modules
from harness.refcheck.prompt_sets import registry as registry
from harness.refcheck.prompt_sets.registry import prompt_set, prompt_sets


def refcheck_suites():
    return [s for s in SUITES if s.refcheck]


def test_every_reference_check_suite_reaches_its_family_through_its_entry():
    from harness.config.arms import WorkloadChoice
    from harness.config.workloads import FAMILIES, load_workload

    assert {"prefix_reuse", "graph_replay", "teacher_forcing", "long_context", "output_coverage",
            "concurrent_prefills"} <= {s.name for s in refcheck_suites()}
    for suite in refcheck_suites():
        sets = [p for p in prompt_sets().values() if p.family == suite.workload]
        assert sets, f"{suite.name}: no prompt set of family {suite.workload}"
        default, model = FAMILIES[suite.workload]
        assert default == suite.default_workload and all(p.model is model for p in sets)
        assert suite.workload in WorkloadChoice.model_fields  # an arm chooses its workload like any family's
        assert isinstance(load_workload(default, kind=model), model)


def test_every_prompt_set_has_its_fixture_and_is_captured_before_the_candidate():
    from harness.pytest_plugin import fixtures
    from harness.pytest_plugin.grouping import REFERENCE_FIRST
    from harness.pytest_plugin.grouping import prompt_sets as needed

    for ps in prompt_sets().values():
        assert callable(getattr(fixtures, ps.fixture)) and ps.fixture in REFERENCE_FIRST
        assert needed(SimpleNamespace(fixturenames=[ps.fixture, "candidate"])) == {ps.name}


def test_a_prompt_set_registered_twice_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "refcheck_modules", lambda: ("check_set", "check_set"))
    with pytest.raises(ConfigError, match="reference_checks.*another refcheck module registers too"):
        registry.prompt_sets.__wrapped__()
    assert len(refcheck_modules()) == len(set(refcheck_modules()))


def test_an_unknown_prompt_set_or_a_family_without_a_model_names_what_is_known():
    from harness.config.workloads import prompt_set_model

    with pytest.raises(ConfigError, match="no prompt set 'nope'; registered: .*reference_checks"):
        prompt_set("nope")
    with pytest.raises(ConfigError, match="names workload family 'nope', and no PromptSetWorkload"):
        prompt_set_model("nope")


def test_each_set_builds_the_candidates_recorded_workload_the_same_every_time(tmp_path):
    from startedruns import shipped

    run = shipped(tmp_path / "run", ["cpu-smoke"])
    for ps in prompt_sets().values():
        prompts, sampling = ps.build(run, "cpu-smoke")
        again, _ = ps.build(run, "cpu-smoke")
        ids = [p.id for p in prompts.all()]
        assert len(ids) == len(set(ids)) and prompts.fingerprint() == again.fingerprint(), ps.name
        w = run.workload(ps.family, "cpu-smoke")
        assert sampling.top_logprobs == w.top_logprobs, ps.name
