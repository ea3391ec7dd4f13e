"""The suite catalogue (harness/config/suites.py) is the one list of suites: every file in suites/ has an entry and
every entry a file, and what the other stages key by suite or workload agrees with it."""

from harness.config.suites import BY_NAME, SUITES, SUITES_DIR, all_suites, default_suites, per_arm_suites, workload_keys


def test_every_suite_file_has_a_catalogue_entry_and_every_entry_a_file():
    files = {p.stem.removeprefix("test_") for p in SUITES_DIR.glob("test_*.py")}
    assert files - set(BY_NAME) == set(), "suites/ files without an entry in harness/config/suites.py SUITES"
    assert set(BY_NAME) - files == set(), "catalogue entries without a suites/test_<name>.py"
    assert len(BY_NAME) == len(SUITES), "a suite catalogued twice"


def test_per_arm_is_what_the_suite_file_asks_for():
    """A suite runs once per arm exactly when its tests take the plugin's `served_arm` fixture."""
    for suite in SUITES:
        assert suite.per_arm == ("served_arm" in suite.path.read_text()), suite.name


def test_workloads_and_record_kinds_name_real_ones():
    from harness.config.arms import WorkloadChoice
    from harness.config.workloads import FAMILIES
    assert set(FAMILIES) == set(WorkloadChoice.model_fields)  # the keys an arm's `workloads:` may set
    assert workload_keys(all_suites()) <= set(FAMILIES)
    kinds = {m.model_fields["kind"].default for m in record_models()}
    assert {k for s in SUITES for k in s.records} <= kinds


def record_models():
    from typing import get_args

    from harness.records.schema import Record

    return get_args(get_args(Record)[0])


def test_every_gated_suite_declares_a_gate_kind_and_every_kind_has_one_judge():
    from harness.config.suites import GATE_KINDS
    from harness.config.thresholds import Gates
    from harness.judge.catalogue_gate import JUDGES

    assert set(JUDGES) == set(GATE_KINDS)
    assert all(bool(s.gate) == bool(s.gate_kind) for s in SUITES)  # a gate is judged as its kind, a kind judges a gate
    assert {s.name: type(s.gate_kind).__name__ for s in SUITES if s.gate_kind} == {
        "long_prefix": "LevelTimingGate", "gsm8k": "AccuracyGate", "ruler": "AccuracyGate",
        "spec_decode": "SpeculativeGates", "long_context": "RecordedVerdictGate", "capacity": "SloCapacityGate",
        "ttft": "MetricGate"}
    for suite in SUITES:
        if getattr(suite.gate_kind, "limits", None):  # a gates.yaml section (a Gates field)
            assert suite.gate_kind.limits in Gates.model_fields, suite.name
        if suite.accuracy_gate:  # its items a field of its record kind
            model = next(m for m in record_models() if m.model_fields["kind"].default == suite.records[0])
            assert suite.accuracy_gate.per_item in model.model_fields, suite.name


def test_each_gate_kind_judges_its_suites_gate_first_as_no_data_without_records():
    from harness.config.suites import gated_suites
    from harness.config.thresholds import Gates
    from harness.judge.catalogue_gate import catalogue_gates

    for suite in gated_suites():
        first = catalogue_gates(suite, [], "a", "b", Gates())[0]
        assert (first.gate, first.suite, first.passed) == (suite.gate, suite.name, False), suite.name
        assert "no data" in first.detail, (suite.name, first.detail)


def test_a_gated_suites_test_file_judges_through_its_entry():
    """Its vs-reference test reaches its gate through its entry (catalogue_gates) and calls no gate function of its
    own."""
    import re

    for suite in SUITES:
        if suite.gate:
            assert re.findall(r"(\w+_gates?)\(", suite.path.read_text()) == ["catalogue_gates"], suite.name


def test_derived_lists():
    assert per_arm_suites(["gsm8k", "kv_capacity", "prefix_reuse", "nope"]) == ["gsm8k", "kv_capacity"]
    assert "ruler" not in default_suites() and "capacity" not in default_suites() and "gsm8k" in default_suites()
    assert "spec_decode" not in workload_keys(["spec_decode", "gsm8k"], speculative=False)
    assert workload_keys(["spec_decode", "gsm8k"]) == {"spec_decode", "gsm8k"}


def test_every_suite_module_imports():
    """pytest collects suites/ only inside a qualify run, so a stale import there (a module moved by a refactor)
    would surface as a run's collection error, never in the unit tests: import each one here."""
    import runpy

    for suite in SUITES:
        assert "test_" + suite.name in runpy.run_path(str(suite.path), run_name=f"suite_{suite.name}"), suite.path


def test_a_timing_suite_is_its_entry_its_workload_and_its_test_file(arms_dir):
    """What a MetricGate entry (the ttft suite) brings with it, no other file edited: its family (the default
    workload loads as a MetricWorkload and fits the smallest arm), the arm field choosing it (an unknown key is still
    refused), its gates.yaml section, its gate and its record kind."""
    import pytest

    from harness.config.arms import ARMS_DIR, load_arm, resolve_raw
    from harness.config.errors import ConfigError
    from harness.config.suites import metric_families, metric_gates
    from harness.config.thresholds import Gates
    from harness.config.workloads import FAMILIES, MetricWorkload, load_workload
    timing = [s for s in SUITES if s.metric_gate]
    assert [s.name for s in timing] == ["ttft"] and metric_families() == {"ttft": "ttft_short"}
    for suite in timing:
        w = load_workload(suite.default_workload, kind=MetricWorkload)
        assert FAMILIES[suite.workload] == (suite.default_workload, MetricWorkload)
        lens = [resolve_raw(p.stem, ARMS_DIR)[0].get("model", {}).get("max_model_len") for p in ARMS_DIR.glob("*.yaml")]
        smallest = min(n for n in lens if n)  # every arm of configs/arms (GPU ones too: their models are not here)
        assert w.prompt_tokens + w.output_tokens <= smallest, (w.name, smallest)
        assert suite.records == ("metric",) and suite.gate in metric_gates()
        assert Gates.model_validate({"metric_gates": {suite.gate: {"tolerance": 0.1}}}).metric_gates[suite.gate]
    d, write = arms_dir
    write("chooses", "extends: base\nworkloads: {ttft: mine}\n")
    assert load_arm("chooses", arms_dir=d).workloads.ttft == "mine"
    write("typo", "extends: base\nworkloads: {tfft: mine}\n")
    with pytest.raises(ConfigError, match="tfft"):
        load_arm("typo", arms_dir=d)
