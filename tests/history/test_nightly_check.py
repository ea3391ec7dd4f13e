"""`harness history check` and `trend` over nights built from a real run's records: a planted 30 % slowdown from
night k (at 3 % noise: found by its third night for every seed, tests/history/test_nightly_gate.py) fails the nights
from then on, named at night k; the same nights without it pass every night they can judge (the gate's persistence
rule: three runs each over the gate's 5 % tolerance, ~1e-4 a night at this noise). The trend page marks the change
point and states the gate, and renders in Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nights import make_nights

from harness.config.paths import REPO_ROOT
from harness.history.changepoints import ChangePoint
from harness.history.command import append_run
from harness.history.nightly import NEEDED
from harness.history.trends import Finding, Series, violated, windows

REAL_RUN = Path(__file__).parents[1] / "fixtures" / "stored_runs" / "h200-2026-12-02c-control"
TPOT = "long_prefix.c1.tpot_p50_ms"


def history(db: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "history", *argv], cwd=REPO_ROOT, capture_output=True,
                          text=True, env={**os.environ, "HARNESS_HISTORY": str(db)}, timeout=120)


@pytest.fixture(scope="module")
def slowed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slowed")
    nights = make_nights(REAL_RUN, tmp / "runs", 14, slow_from=9, step=0.30, sigma=0.03, seed=4)
    for n in nights:
        append_run(n, tmp / "h.sqlite")
    return tmp / "h.sqlite", nights


def test_planted_slowdown_fails_from_its_third_night_naming_the_run_it_entered(slowed):
    db, nights = slowed
    # night-00 is run 1; a steady series is judged from 6 runs (night-05), a noisy one from NEEDED = 7
    checks = {n: history(db, "check", "--run", f"night-{n:02d}") for n in range(NEEDED - 3, 14)}
    short = checks[NEEDED - 3]
    assert short.returncode == 3 and "NOT JUDGED (not enough history" in short.stdout, short.stdout
    failing = [n for n, c in checks.items() if c.returncode == 1]
    # two slow nights are a level only in a steady series: at 3 % noise the level takes three (night 11)
    assert failing and failing[0] in (10, 11), {n: c.stdout for n, c in checks.items()}
    first = checks[failing[0]].stdout
    assert f"FAIL: gpu-mla-120k {TPOT}: regression" in first and "since run night-09" in first, first
    assert checks[8].returncode == 0 and "false-alarm budget 1% of clean nights" in checks[8].stdout
    # the regression stands while it lasts: every later night fails too, never a PASS over a slow level
    assert failing == list(range(failing[0], 14)), failing
    trend = history(db, "trend", "--arm", "gpu-mla-120k", "--metric", TPOT)
    assert trend.returncode == 0 and "| night-09 |" in trend.stdout and "regression" in trend.stdout


def test_the_same_nights_without_the_slowdown_pass_every_night_they_can_judge(tmp_path):
    db = tmp_path / "h.sqlite"
    for n in make_nights(REAL_RUN, tmp_path / "runs", 14, sigma=0.03, seed=4):
        append_run(n, db)
    for night in range(NEEDED - 3, 14):
        check = history(db, "check", "--run", f"night-{night:02d}")
        assert check.returncode == (0 if night + 1 >= NEEDED - 1 else 3), check.stdout  # steady series: 6 runs
    assert "0 change point(s)" in history(db, "trend", "--arm", "gpu-mla-120k", "--metric", TPOT).stdout


def test_a_run_not_in_the_history_is_a_clear_error(tmp_path):
    append_run(REAL_RUN, tmp_path / "h.sqlite")  # a store that is not there is refused as such (test_history_input)
    check = history(tmp_path / "h.sqlite", "check", "--run", "nope")
    assert check.returncode == 2 and "not in" in check.stderr and "append" in check.stderr


def finding(metric: str, before: float, after: float, runs=("a", "b", "c", "d", "e")) -> Finding:
    return Finding("arm", metric, ChangePoint(3, before, after, 1e-4), list(runs))


def test_direction_per_metric():
    assert finding(TPOT, 3.0, 3.3).regression and not finding(TPOT, 3.3, 3.0).regression
    assert finding("kv_capacity.tokens", 2e6, 1.8e6).regression
    assert finding("check.prefix_reuse.exact_rate", 1.0, 0.9).regression
    assert finding("gsm8k.accuracy", 0.9, 0.95).regression is False


def test_hud_window_rule_flags_two_worse_runs_after_a_steady_baseline():
    s = Series("arm", TPOT, [str(i) for i in range(8)], [3.0, 3.1, 2.9, 3.0, 3.05, 2.95, 3.4, 3.5])
    assert violated(s, windows(s))
    s2 = Series("arm", TPOT, s.runs, [3.0, 3.1, 2.9, 3.0, 3.05, 2.95, 3.4, 3.0])
    assert not violated(s2, windows(s2))


def test_trend_page_marks_the_change_point_and_this_run(slowed, monkeypatch):
    from harness.report.trend import trend_view

    db, _ = slowed
    monkeypatch.setenv("HARNESS_HISTORY", str(db))
    view = trend_view("night-12", ["gpu-mla-120k"])
    assert view.png and any("night-09" in line and TPOT in line for line in view.change_points)
    monkeypatch.setenv("HARNESS_HISTORY", str(db.parent / "none.sqlite"))
    assert trend_view("night-12", ["gpu-mla-120k"]).png is None


def red_share(png: Path) -> float:
    import matplotlib.image as mpimg

    px = mpimg.imread(png)[..., :3]
    return float(((px[..., 0] > 0.7) & (px[..., 1] < 0.3) & (px[..., 2] < 0.3)).mean())


def test_trend_page_renders_in_chromium_with_its_change_point_drawn(slowed, tmp_path, monkeypatch):
    from harness.report.render import render_run
    from harness.report.screenshot import find_chromium, take_screenshot

    if find_chromium() is None:
        pytest.skip("no Chromium on this machine and `make chromium` could not install it (needs root and apt-get)")
    db, nights = slowed
    shown = {}
    for store_path in (db, tmp_path / "empty.sqlite"):
        monkeypatch.setenv("HARNESS_HISTORY", str(store_path))
        html = render_run(nights[12]).html_path
        assert ('id="trend"' in html.read_text()) and (("data:image/png" in html.read_text().split('id="trend"')[1])
                                                        == (store_path == db))
        shown[store_path == db] = red_share(take_screenshot(html, tmp_path / "r.png", height=6000))
    assert shown[True] > 1e-5 and shown[False] == 0, shown  # the red change-point lines and this run's ring


def test_coverage_accumulates_the_lengths_every_run_checked():
    from harness.history.extract import CoverageRow, coverage_lines

    rows = [("n1", CoverageRow("a", "long_context", 512, 1)), ("n1", CoverageRow("a", "long_context", 2769, 1)),
            ("n2", CoverageRow("a", "long_context", 512, 3)), ("n2", CoverageRow("a", "long_context", 1814, 1))]
    assert coverage_lines(rows) == ["a long_context: 3 distinct lengths, 512..2,769 tokens, over 2 runs; "
                                    "batch sizes 1, 3"]
    # issue 46's dimensions: generated tokens, and the preemptions a pressure check proved
    rows = [("n1", CoverageRow("a", "kv_pressure", 3120, 12, 64, 1)), ("n2", CoverageRow("a", "kv_pressure", 3120, 12,
                                                                                      64, 3)),
            ("n1", CoverageRow("a", "long_generation", 3256, 1, 256))]
    assert coverage_lines(rows) == [
        "a kv_pressure: 1 distinct lengths, 3,120..3,120 tokens, over 2 runs; batch sizes 12; up to 64 generated "
        "tokens; 4 preemptions over 2 runs",
        "a long_generation: 1 distinct lengths, 3,256..3,256 tokens, over 1 runs; batch sizes 1; up to 256 generated "
        "tokens"]


def test_trend_view_states_the_coverage_of_the_stored_runs(slowed, monkeypatch):
    from harness.report.trend import trend_view

    db, _ = slowed
    monkeypatch.setenv("HARNESS_HISTORY", str(db))
    [line] = [c for c in trend_view("night-12", ["gpu-mla-120k"]).coverage if "long_context" in c]
    assert line.startswith("gpu-mla-120k long_context: ") and "over 14 runs" in line


def test_backfill_of_a_path_that_is_no_directory_is_refused(tmp_path):
    out = history(tmp_path / "h.sqlite", "backfill", str(tmp_path / "nope"))
    assert out.returncode == 2 and "not a directory" in out.stderr
