"""Bad input to the history (issue 47, item 7), each a real `python -m harness ...`: exit 2, one message naming the
store, flag, arm or metric and what to do, no traceback or warning, and nothing created or deleted (the scratch tree
and the store are byte-for-byte unchanged). The good inputs beside them: a store made where it may be, the largest
seed the flags accept stored as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from nights import make_nights

from harness.config.numbers import SEED_LIMIT
from harness.config.paths import REPO_ROOT
from harness.history import store
from harness.history.command import append_run
from harness.history.extract import run_rows

REAL_RUN = Path(__file__).parents[1] / "fixtures" / "stored_runs" / "h200-2026-12-02c-control"
ARM = "gpu-mla-120k"
READING = {"list": [], "trend": ["--arm", ARM], "compare": ["--arm", ARM], "coverage": ["--arm", ARM],
           "check": ["--run", "night-00"], "prune": ["--keep", "1"]}
WRITING = {"append": ["--run", str(REAL_RUN)], "backfill": [str(REAL_RUN)]}


def harness(store_path: Path | str, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, "HARNESS_HISTORY": str(store_path), **env}, timeout=120)


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


def refused(out: subprocess.CompletedProcess, *needles: str) -> None:
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert "Traceback" not in text and "Warning" not in text, text
    assert len([line for line in out.stderr.splitlines() if "error:" in line]) == 1, text
    assert not [n for n in needles if n not in text], (needles, text)


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A store of three nights of a real run."""
    tmp = tmp_path_factory.mktemp("stored")
    for night in make_nights(REAL_RUN, tmp / "runs", 3):
        append_run(night, tmp / "h.sqlite")
    return tmp / "h.sqlite"


@pytest.mark.parametrize("command", [*READING, *WRITING])
def test_a_store_under_a_missing_directory_is_refused_and_not_made(command, tmp_path):
    path = tmp_path / "typo" / "h.sqlite"
    before = snapshot(tmp_path)
    out = harness(path, "history", command, *{**READING, **WRITING}[command])
    refused(out, f"HARNESS_HISTORY={path}")
    assert ("directory" in out.stderr and "does not exist" in out.stderr) if command in WRITING else \
        "no history at" in out.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", READING)
def test_a_reading_command_refuses_a_store_that_is_not_there_and_makes_none(command, tmp_path):
    out = harness(tmp_path / "h.sqlite", "history", command, *READING[command])
    refused(out, f"no history at HARNESS_HISTORY={tmp_path / 'h.sqlite'}", "backfill")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["list", "append"])
def test_a_store_under_a_plain_file_is_refused_naming_the_file(command, tmp_path):
    (tmp_path / "hostname").write_text("h\n")
    before = snapshot(tmp_path)
    out = harness(tmp_path / "hostname" / "x.sqlite", "history", command, *{**READING, **WRITING}[command])
    refused(out, f"{tmp_path / 'hostname'} is a file, not a directory" if command in WRITING else "no history at")
    assert snapshot(tmp_path) == before


def test_a_directory_where_the_store_should_be_is_refused(tmp_path):
    out = harness(tmp_path, "history", "append", "--run", str(REAL_RUN))
    refused(out, "not a file")


@pytest.mark.parametrize("keep", ["-1", "0", "1.5", "x"])
def test_prune_refuses_to_keep_fewer_than_one_run_and_deletes_nothing(keep, stored):
    before = stored.read_bytes()
    out = harness(stored, "history", "prune", "--keep", keep)
    refused(out, "--keep", f"'{keep}': give a whole number of at least 1", "delete the store file")
    assert stored.read_bytes() == before


def test_prune_keeps_the_newest_run_when_asked_for_one(stored, tmp_path):
    copy = tmp_path / "h.sqlite"
    copy.write_bytes(stored.read_bytes())
    out = harness(copy, "history", "prune", "--keep", "1")
    assert out.returncode == 0 and "pruned 2 runs" in out.stdout, out.stdout + out.stderr


def test_trend_of_an_unknown_metric_is_refused_naming_ones_the_arm_has(stored):
    out = harness(stored, "history", "trend", "--arm", ARM, "--metric", "no.such.metric")
    refused(out, "--metric 'no.such.metric'", f"arm {ARM} has no such metric", "check.long_context.exact_rate")
    out = harness(stored, "history", "trend", "--arm", ARM, "--metric", "long_prefix.c1.tpot_p50")  # a typo
    refused(out, "long_prefix.c1.tpot_p50_ms")
    assert "no such metric" in out.stderr


@pytest.mark.parametrize("command", ["trend", "compare", "coverage"])
def test_an_arm_the_store_does_not_hold_is_refused_naming_the_ones_it_does(command, stored):
    out = harness(stored, "history", command, "--arm", "gpu-mla-12k")
    refused(out, f"history {command} --arm 'gpu-mla-12k'", f"its arms: {ARM}, {ARM}-ref")


def test_trend_of_a_known_metric_still_prints_its_series(stored):
    out = harness(stored, "history", "trend", "--arm", ARM, "--metric", "long_prefix.c1.tpot_p50_ms")
    assert out.returncode == 0 and "3 finished runs" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("flag", ["--order-seed", "--length-seed"])
@pytest.mark.parametrize("value", [str(2**70), str(SEED_LIMIT), "-1", "1e3", "٣"])
def test_a_seed_the_history_cannot_store_is_refused_naming_the_flag(flag, value, tmp_path):
    reports = tmp_path / "reports"
    out = harness(tmp_path / "h.sqlite", "qualify", "--arm", "cpu-smoke", flag, value, "--suites", "kv_capacity",
                  HARNESS_REPORTS_DIR=str(reports))
    text = out.stdout + out.stderr
    assert out.returncode == 2 and f"argument {flag}: '{value}': give a whole number from" in text, text
    assert "Traceback" not in text and list(tmp_path.iterdir()) == []


def test_the_largest_seed_accepted_is_stored_and_the_next_one_could_not_be(tmp_path):
    """SEED_LIMIT is SQLite's: a run with the largest order seed the flag takes is appended; one past it is not."""
    rows = run_rows(REAL_RUN)
    store.append(replace(rows, run=replace(rows.run, order_seed=SEED_LIMIT - 1)), tmp_path / "h.sqlite")
    with store.connect(tmp_path / "h.sqlite") as db:
        assert [r.order_seed for r in store.runs(db)] == [SEED_LIMIT - 1]
    with pytest.raises(OverflowError):
        store.append(replace(rows, run=replace(rows.run, order_seed=SEED_LIMIT)), tmp_path / "h.sqlite")


def test_qualify_refuses_a_store_under_a_missing_directory_before_anything_is_written(tmp_path):
    reports = tmp_path / "reports"
    out = harness(tmp_path / "typo" / "h.sqlite", "qualify", "--arm", "cpu-smoke", "--suites", "kv_capacity",
                  HARNESS_REPORTS_DIR=str(reports))
    refused(out, f"HARNESS_HISTORY={tmp_path / 'typo' / 'h.sqlite'}", "does not exist")
    assert list(tmp_path.iterdir()) == []


def test_the_default_store_and_the_nightlys_relative_one_are_made_with_the_reports_directory(tmp_path, monkeypatch):
    """qualify's default store, reports/history.sqlite, and the nightly's reports/history-<group>.sqlite (relative
    to the checkout) may be the first thing in a reports directory not made yet: the harness makes that one."""
    reports = tmp_path / "reports"
    monkeypatch.setattr(store, "REPORTS_DIR", reports)
    monkeypatch.chdir(tmp_path)
    append_run(REAL_RUN, Path("reports/history-g.sqlite"))
    store.check_store_path(reports / "history.sqlite", create=True)
    with store.connect(reports / "history-g.sqlite") as db:
        assert [r.run_id for r in store.runs(db)] == [REAL_RUN.name]
    with pytest.raises(store.HistoryError, match="does not exist"):
        store.check_store_path(tmp_path / "other" / "history.sqlite", create=True)
