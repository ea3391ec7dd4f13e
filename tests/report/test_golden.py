"""Stored runs written before the package was restructured (tests/golden/, by commit bf13e04's harness) re-render to
the same tables: a results file outlives the code that wrote it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.report.render import render_run

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TABLE_FILES = sorted(p.name for p in (GOLDEN / "tables").iterdir())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("golden")
    for name in ("golden-run", "golden-baseline"):
        shutil.copytree(GOLDEN / name, work / name)
    render_run(work / "golden-run", str(work / "golden-baseline"))
    return work / "golden-run" / "tables"


@pytest.mark.parametrize("name", TABLE_FILES)
def test_stored_run_re_renders_to_the_golden_table(rendered, name):
    assert (rendered / name).read_text() == (GOLDEN / "tables" / name).read_text()


def test_no_table_is_missing_from_the_golden_files(rendered):
    assert sorted(p.name for p in rendered.iterdir()) == TABLE_FILES
