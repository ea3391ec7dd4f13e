"""What a run started with, read back from run.json (harness/records/started.py): the recorded workloads become the
workload models the suites run, whatever the YAML says now; an arm that differs from the recorded one is named with
its file and first differing field."""

from __future__ import annotations

import json

import pytest

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.paths import WORKLOADS_DIR
from harness.config.suites import SUITES
from harness.config.workloads import FAMILIES, LongPrefixWorkload, RulerWorkload, load_workload
from harness.records.manifest import RunManifest, RunPair, parse_manifest
from harness.records.started import ABSENT, arm_change, first_difference, recorded_workload


def as_json(value):
    return json.loads(json.dumps(value))  # what run.json gives back


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_workload_file_round_trips_through_its_dump(family):
    """Every family a suite may need, every file of it in configs/workloads: the dump run.json records (JSON) is the
    same workload model again."""
    kind = FAMILIES[family][1]
    files = sorted(p.stem for p in WORKLOADS_DIR.glob(f"{family}*.yaml"))
    assert files, family
    for name in files:
        w = load_workload(name, kind=kind)
        manifest = RunManifest(pairs=[RunPair(candidate="c", workloads={family: as_json(w.model_dump(mode="json"))})])
        assert recorded_workload(manifest, "c", family, WORKLOADS_DIR) == w, name


def test_every_suites_workload_family_is_recorded():
    """workload_dumps records every FAMILIES entry; every suite's workload key is one of them."""
    assert {s.workload for s in SUITES if s.workload} <= set(FAMILIES)


def test_data_file_paths_are_recorded_as_written(tmp_path):
    """RULER's tokenizer directory stays the path the YAML gave (a relative one is resolved against the repository
    at use, as from the YAML)."""
    (tmp_path / "r.yaml").write_text("max_seq_lengths: [1024]\nlimit: 2\ntokenizer: models/tiny-llama\n")
    w = load_workload("r", tmp_path, kind=RulerWorkload)
    manifest = RunManifest(pairs=[RunPair(candidate="c", workloads={"ruler": as_json(w.model_dump(mode="json"))})])
    back = recorded_workload(manifest, "c", "ruler", tmp_path)
    assert back == w and back.tokenizer == "models/tiny-llama"


def long_prefix(**changes) -> dict:
    return as_json(load_workload("long_prefix_cpu").model_copy(update=changes).model_dump(mode="json"))


def test_the_pairs_own_workload_wins_and_an_older_manifest_falls_back_to_the_runs():
    manifest = parse_manifest({"arms": {"a": {}, "r": {}}, "workloads": {"long_prefix": long_prefix(output_tokens=16)},
                               "pairs": [{"candidate": "a", "reference": "r",
                                          "workloads": {"long_prefix": long_prefix(output_tokens=24)}},
                                         {"candidate": "b", "reference": "r"}]})
    assert recorded_workload(manifest, "a", "long_prefix", WORKLOADS_DIR).output_tokens == 24
    assert recorded_workload(manifest, "b", "long_prefix", WORKLOADS_DIR).output_tokens == 16
    assert isinstance(recorded_workload(manifest, "b", "long_prefix", WORKLOADS_DIR), LongPrefixWorkload)


@pytest.mark.parametrize("workloads, candidate, message", [
    ({"long_prefix": {"error": "unknown workload 'x'"}}, "a",
     "could not be read when the run started: unknown workload 'x'; fix it and start a new run"),
    ({"gsm8k": {}}, "a", "no long_prefix workload recorded for candidate 'a'"),
    ({"long_prefix": {"name": "w", "prefix_tokens": 1}}, "a", "is no valid LongPrefixWorkload for this harness"),
    ({"long_prefix": {}}, "z", "candidate 'z' is not one this run started with (its candidates: a)"),
])
def test_a_workload_that_cannot_be_had_from_run_json_says_why(workloads, candidate, message):
    manifest = RunManifest(pairs=[RunPair(candidate="a", workloads=workloads)])
    with pytest.raises(ConfigError) as exc:
        recorded_workload(manifest, candidate, "long_prefix", WORKLOADS_DIR / "run.json")
    assert message in str(exc.value)


def test_first_difference_names_the_field_path_and_both_values():
    a = {"model": {"path": "m", "max_model_len": 4096}, "server": {"args": ["--x", "1"]}, "gpus": None}
    assert first_difference(a, as_json(a)) is None
    assert first_difference(a, {**a, "model": {"path": "m", "max_model_len": 8192}}) == \
        ("model.max_model_len", 4096, 8192)
    assert first_difference(a, {**a, "server": {"args": ["--x", "2"]}}) == ("server.args[1]", "1", "2")
    assert first_difference(a, {**a, "server": {"args": ["--x"]}}) == ("server.args", ["--x", "1"], ["--x"])
    field, before, _ = first_difference(a, {**a, "extra": 1})
    assert (field, before) == ("extra", ABSENT)


def test_an_unchanged_arm_passes_and_a_changed_one_names_its_file_and_field(arms_dir):
    d, write = arms_dir
    path = write("cand", "extends: base\nparallelism: {tp: 8, dcp: 8}\n")
    recorded = as_json(load_arm("cand", (), d).model_dump(mode="json"))
    assert arm_change(load_arm("cand", (), d), recorded, as_json(load_arm("cand", (), d).model_dump(mode="json"))) \
        is None
    path.write_text("extends: base\nparallelism: {tp: 8, dcp: 4}\n")  # edited while the run goes on
    now = load_arm("cand", (), d)
    message = arm_change(now, recorded, now.model_dump(mode="json"))
    assert message == (f"arm 'cand': {path} changed since the run started: field parallelism.dcp is now 4, the run "
                       "started with 8 (run.json). Restart the run, or restore the file")


def test_a_field_set_in_the_extended_file_is_named_with_that_file(arms_dir):
    d, write = arms_dir
    write("cand", "extends: base\n")
    recorded = as_json(load_arm("cand", (), d).model_dump(mode="json"))
    base = d / "base.yaml"
    base.write_text(base.read_text().replace("max_model_len: 4096", "max_model_len: 2048"))
    now = load_arm("cand", (), d)
    message = arm_change(now, recorded, now.model_dump(mode="json"))
    assert f"arm 'cand': {base} changed since the run started: field model.max_model_len is now 2048" in message


def test_the_file_named_is_the_one_that_sets_the_changed_field_not_only_its_section(arms_dir):
    d, write = arms_dir
    cand = write("cand", "extends: base\nmodel: {served_name: other}\n")  # a `model:` section of its own
    recorded = as_json(load_arm("cand", (), d).model_dump(mode="json"))
    base = d / "base.yaml"
    base.write_text(base.read_text().replace("max_model_len: 4096", "max_model_len: 2048"))
    now = load_arm("cand", (), d)
    assert arm_change(now, recorded, now.model_dump(mode="json")).startswith(f"arm 'cand': {base} changed")
    cand.write_text("extends: base\nmodel: {served_name: third}\n")
    now = load_arm("cand", (), d)
    assert arm_change(now, recorded, now.model_dump(mode="json")).startswith(f"arm 'cand': {cand} changed")

