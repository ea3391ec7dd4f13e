"""run.json through RunManifest: stored run directories written before the manifest existed re-render to the same
tables, every shape of run.json loads through the one migration, and the keys written stay the ones readers outside
Python use.

Fixtures (tests/fixtures/stored_runs/, run.json, results.jsonl and the samples/telemetry files rendering reads;
server logs and report.html left out):
  h200-2026-12-02c-control         docs/evidence/h200-long-context-2026-12-02c/control-runs.tar.gz, runs/control:
                                   its tables/ are the ones stored in the tarball, as the run wrote them.
  h200-2026-12-02-first-call-keys  docs/evidence/h200-long-context-2026-12-02/first-call-runs.tar.gz,
                                   runs/keys_past_L_ignored: the renderer has gained a capacity table since that run,
                                   so its tables/ were rendered once by the code before RunManifest (commit a60e9dc
                                   plus the module renames of issue #24) and committed here.
Both are unversioned run.json files with pairs; the oldest shape (no pairs, no gates) is tests/golden/golden-run,
re-rendered by tests/report/test_golden.py through the same loader and checked here as a manifest.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.records.manifest import SCHEMA_VERSION, ManifestError, load_manifest, parse_manifest
from harness.report.render import render_run

TESTS = Path(__file__).resolve().parents[1]
STORED = TESTS / "fixtures" / "stored_runs"
RUNS = sorted(p.name for p in STORED.iterdir())


@pytest.mark.parametrize("name", RUNS)
def test_a_stored_run_re_renders_to_the_same_tables(tmp_path, name):
    run = tmp_path / name
    shutil.copytree(STORED / name, run, ignore=shutil.ignore_patterns("tables"))
    render_run(run)
    want = sorted(p.name for p in (STORED / name / "tables").iterdir())
    assert sorted(p.name for p in (run / "tables").iterdir()) == want
    for table in want:
        assert (run / "tables" / table).read_text() == (STORED / name / "tables" / table).read_text(), table


@pytest.mark.parametrize("run_dir", [*(STORED / n for n in RUNS), TESTS / "golden" / "golden-run"])
def test_every_stored_shape_loads_through_the_migration(run_dir):
    raw = json.loads((run_dir / "run.json").read_text())
    assert "schema_version" not in raw  # written before the version existed
    manifest, problems = load_manifest(run_dir)
    assert problems == [] and manifest.schema_version == SCHEMA_VERSION and manifest.run_id == run_dir.name
    assert manifest.pairs and manifest.pairs[0].candidate == next(iter(raw["arms"]))
    written = json.loads(manifest.to_json())
    assert set(raw) <= set(written)  # additive only: every key a reader outside Python used is still there
    assert {k: written[k] for k in raw if k != "pairs"} == {k: v for k, v in raw.items() if k != "pairs"}


def test_the_oldest_shape_gets_its_first_arm_against_the_second():
    m = parse_manifest(json.loads((TESTS / "golden" / "golden-run" / "run.json").read_text()), "golden-run")
    assert [(p.candidate, p.reference, p.gates) for p in m.pairs] == [("cpu-smoke", "cpu-ref", None)]
    assert m.workloads_of(m.pairs[0]) == m.workloads


def test_a_current_manifest_round_trips_unchanged(tmp_path):
    manifest, _ = load_manifest(STORED / RUNS[0])
    assert parse_manifest(json.loads(manifest.to_json())) == manifest


def test_a_newer_version_or_an_unknown_key_is_refused(tmp_path):
    with pytest.raises(ManifestError, match="schema_version 2"):
        parse_manifest({"schema_version": 2, "arms": {}})
    (tmp_path / "run.json").write_text(json.dumps({"arms": {"a": {}}, "argvv": []}))
    manifest, problems = load_manifest(tmp_path)
    assert manifest is None and "argvv" in problems[0] and "not a run manifest" in problems[0]


def test_a_run_json_that_is_not_utf8_is_a_problem_not_a_traceback(tmp_path):
    (tmp_path / "run.json").write_bytes(b'\xff\xfe{"arms"')
    manifest, problems = load_manifest(tmp_path)
    assert manifest is None and problems == [f"{tmp_path / 'run.json'}: not UTF-8 text (byte 0); provenance unknown"]


def test_read_manifest_says_by_type_why_there_is_none(tmp_path):
    from harness.records.manifest import ManifestMissing, ManifestUnreadable, NotAManifest, read_manifest

    with pytest.raises(ManifestMissing, match="missing"):
        read_manifest(tmp_path)
    (tmp_path / "run.json").write_text("{")
    with pytest.raises(ManifestUnreadable, match="not JSON"):
        read_manifest(tmp_path)
    (tmp_path / "run.json").write_text("[]")
    with pytest.raises(ManifestUnreadable, match="not a JSON object"):
        read_manifest(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": 2}))
    with pytest.raises(NotAManifest, match="schema_version 2"):
        read_manifest(tmp_path)


def test_finish_run_info_keeps_a_file_that_is_no_manifest_and_completes_a_missing_one(tmp_path):
    """Decided by the problem's kind, not its text: a run directory whose very name reads 'not a run manifest' and
    has no run.json still gets its end written (matching the message text would have left it without one)."""
    from harness.records.runinfo import finish_run_info

    other = tmp_path / "other"
    other.mkdir()
    foreign = json.dumps({"schema_version": 7, "arms": {}})
    (other / "run.json").write_text(foreign)
    kept = finish_run_info(other, 0)
    assert (other / "run.json").read_text() == foreign and kept.exit_code == 0

    misleading = tmp_path / "not a run manifest"
    misleading.mkdir()
    finish_run_info(misleading, 1)
    manifest, problems = load_manifest(misleading)
    assert problems == [] and manifest.exit_code == 1 and manifest.finished
