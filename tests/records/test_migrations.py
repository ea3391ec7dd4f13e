"""One migration rule for every stored file (records.migrations): steps run in order from the document's version, a
current document passes untouched, a newer one or one no step leads from is refused naming the file kind and the
remedy; and each stored file kind goes through it (run.json, results records, reference files, calibrations)."""

from __future__ import annotations

import json

import pytest

from harness.records.manifest import RUN_JSON, ManifestError, migrate
from harness.records.migrations import FormatError, StoredFormat, upgrade
from harness.records.results import RESULT_RECORD, parse_record
from harness.refcheck.store.floor_store import CALIBRATION_FILE, CalibrationUnreadable, load_calibration
from harness.refcheck.store.reference_store import REFERENCE_FILE

STEPPED = StoredFormat("thing", "api_version", 3, {
    0: lambda doc, **_: {**doc, "seen": [*doc.get("seen", []), 0]},
    1: lambda doc, **_: {**doc, "seen": [*doc["seen"], 1]},
    2: lambda doc, suffix="", **_: {**doc, "seen": [*doc["seen"], 2], "name": doc.get("name", "") + suffix},
}, remedy="ask for help")


def test_steps_run_in_order_from_the_documents_version_and_stamp_each():
    assert upgrade({}, STEPPED, suffix="!") == {"seen": [0, 1, 2], "name": "!", "api_version": 3}
    assert upgrade({"api_version": 2, "seen": []}, STEPPED) == {"api_version": 3, "seen": [2], "name": ""}
    current = {"api_version": 3, "x": 1}
    assert upgrade(current, STEPPED) is current  # untouched


@pytest.mark.parametrize("version, why", [(4, "version 3 and older; ask for help"), ("2", "'2'"), (True, "True"),
                                          (-1, "-1")])
def test_a_newer_or_malformed_version_is_refused_with_the_remedy(version, why):
    with pytest.raises(FormatError, match="api_version") as exc:
        upgrade({"api_version": version}, STEPPED)
    assert why in str(exc.value) and "thing" in str(exc.value)


def test_a_missing_step_is_refused_not_skipped():
    gap = StoredFormat("gap", "v", 2, {1: lambda doc, **_: doc})
    with pytest.raises(FormatError, match="no step from version 0"):
        upgrade({}, gap)
    with pytest.raises(FormatError, match="not an object"):
        upgrade([1, 2], gap)


def test_every_stored_file_kind_declares_its_format():
    assert (RUN_JSON.current, RESULT_RECORD.current, REFERENCE_FILE.current, CALIBRATION_FILE.current) == (1, 1, 1, 2)
    # run.json's one step: the unversioned shapes gain pairs and the run id
    old = migrate({"arms": {"dcp8": {}, "tp8": {}}, "gates": {"g": 1}}, "run-1")
    assert old["schema_version"] == 1 and old["run_id"] == "run-1"
    assert old["pairs"] == [{"candidate": "dcp8", "reference": "tp8", "gates": {"g": 1}, "workloads": None}]
    with pytest.raises(ManifestError, match="schema_version 2: this harness reads run.json version 1"):
        migrate({"schema_version": 2}, "run-1")
    record, problem = parse_record({"kind": "outcome"}, 3, "results.jsonl")
    assert record is None and "results.jsonl:3: schema_version 0" in problem and "no step from version 0" in problem


def test_a_calibration_from_before_formats_reads_and_a_newer_one_is_refused(tmp_path):
    fields = {"check": "long_context", "repeats": 3, "calibrated": "2026-12-01", "drift_limit": 0.1, "tie_gap": 0.01}
    from harness.refcheck.store.floor_store import OPTIONAL_FIELDS, Calibration

    known = {k: v for k, v in fields.items() if k in Calibration.__dataclass_fields__}
    missing = {k: 0 for k in Calibration.__dataclass_fields__ if k not in known and k not in OPTIONAL_FIELDS}
    (tmp_path / "long_context.calibration.json").write_text(json.dumps({**known, **missing}))
    old = load_calibration(tmp_path, "long_context")  # unversioned: format 1 as it stands
    # format 1 recorded no build and no chain of trust: judged by gates.yaml on its own build, a first calibration
    assert old.check == "long_context" and old.first and old.judged_against == "gates.yaml" and old.build is None
    (tmp_path / "long_context.calibration.json").write_text(json.dumps({"format": 1, **known, **missing}))
    assert load_calibration(tmp_path, "long_context") == old
    (tmp_path / "long_context.calibration.json").write_text(json.dumps({"format": 3, **known, **missing}))
    with pytest.raises(CalibrationUnreadable, match="format 3: this harness reads calibration version 2"):
        load_calibration(tmp_path, "long_context")
