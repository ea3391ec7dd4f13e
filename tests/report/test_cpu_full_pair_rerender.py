"""A CPU full-pair run (`make qualify`: cpu-smoke vs cpu-ref, every default suite, at 442260d) re-renders to the
tables the harness of that commit rendered from it: the stored H200 runs and the golden run cover older shapes
(tests/records/test_manifest.py, tests/report/test_golden.py); this one covers every record kind a default run writes
today (output_coverage, bursts, the sweep, GSM8K answers, schema-versioned run.json)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.report.render import render_run

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_full_pair" / "20261205-165342"
TABLES = sorted(p.name for p in (STORED / "tables").iterdir())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("cpu_full_pair") / STORED.name
    shutil.copytree(STORED, run, ignore=shutil.ignore_patterns("tables"))
    render_run(run)
    return run / "tables"


def test_no_table_is_missing_or_added(rendered):
    assert sorted(p.name for p in rendered.iterdir()) == TABLES


@pytest.mark.parametrize("name", TABLES)
def test_the_cpu_full_pair_run_re_renders_to_its_tables(rendered, name):
    assert (rendered / name).read_text() == (STORED / "tables" / name).read_text()
