"""The HTML report renders in a real browser: headless Chromium screenshots it (installed by `make chromium`,
which `make test` runs first); the pixels must show the page, not a blank one; and at 1,280 px every table fits the
page (issue 58 item 7: the Performance and Reference checks tables ran off its right edge)."""

from __future__ import annotations

import pandas as pd
import pytest
from reportrun import make_run

from harness.config.errors import HarnessError
from harness.report.html import ReportContent, render_html
from harness.report.render import render_run
from harness.report.screenshot import (
    chromium_argv,
    find_chromium,
    overflowing_tables,
    probe_result,
    probed,
    take_screenshot,
)
from tests.report.stored_failing import failing_copy

needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="no Chromium on this machine and `make chromium` "
                                    "could not install it (needs root and apt-get); the screenshot is not taken")


def ink(png) -> tuple[float, float]:
    """(fraction of non-white pixels, fraction of green verdict-box pixels) of a screenshot."""
    import matplotlib.image as mpimg

    px = mpimg.imread(png)[..., :3]
    nonwhite = (px.min(axis=2) < 0.9).mean()
    green = ((px[..., 1] > 0.9) & (px[..., 0] < 0.9) & (px[..., 2] < 0.9)).mean()
    return float(nonwhite), float(green)


@needs_chromium
def test_report_screenshot_shows_text_plots_and_the_verdict(tmp_path):
    html = render_run(make_run(tmp_path)).html_path
    png = take_screenshot(html, tmp_path / "report.png", height=3000)
    nonwhite, green = ink(png)
    assert nonwhite > 0.03, f"the page looks empty: {nonwhite:.3%} non-white pixels"
    assert green > 0.0005, "the green PASSED verdict box is not visible"
    assert overflowing_tables(html) == []


@needs_chromium
def test_blank_page_screenshot_fails_the_same_checks(tmp_path):
    page = tmp_path / "blank.html"
    page.write_text("<!DOCTYPE html><html><body></body></html>")
    nonwhite, green = ink(take_screenshot(page, tmp_path / "blank.png", height=3000))
    assert nonwhite < 0.03 and green == 0.0


def test_chromium_runs_offline_with_a_fresh_profile(tmp_path):
    argv = chromium_argv("chromium", tmp_path / "r.html", tmp_path / "r.png", tmp_path / "profile", 1280, 900)
    for flag in ("--headless", "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={tmp_path / 'r.png'}",
                 "--window-size=1280,900"):
        assert flag in argv
    assert argv[-1] == (tmp_path / "r.html").as_uri()


@needs_chromium
def test_every_table_of_a_stored_failing_cpu_run_fits_1280_px(tmp_path):
    # the run of the screenshot: 12 Performance columns and 11 Reference checks columns, long cells
    assert overflowing_tables(render_run(failing_copy(tmp_path)).html_path) == []


@needs_chromium
def test_a_planted_too_wide_table_fails_the_layout_check_by_name(tmp_path):
    wide = pd.DataFrame({f"column {i}": ["x" * 30] for i in range(30)})  # no break opportunity in any cell
    fits = pd.DataFrame({"Arm": ["cpu-smoke", "cpu-ref"], "KV tokens": ["25.6k", "174.7k"]})
    page = tmp_path / "report.html"
    page.write_text(render_html(ReportContent("planted", "PASSED", True, {}, [("Fits", fits), ("Too wide", wide)])))
    [found] = overflowing_tables(page)
    assert found.startswith("Too wide: ") and found.endswith(" px wide in 1216 px"), found
    # the page before issue 58: a table outside any box, wider than the page, is named by the heading above it
    bare = tmp_path / "bare.html"
    bare.write_text("<!DOCTYPE html><html><body><h2>Performance</h2><table><tr>"
                    + "<td>timing&nbsp;invalid&nbsp;(buffered&nbsp;stream)</td>" * 40 + "</tr></table></body></html>")
    assert [x.split(":")[0] for x in overflowing_tables(bare)] == ["Performance", "the page"]


def test_the_probe_runs_last_and_a_page_it_never_ran_in_is_an_error():
    assert probed("<html><body><p>x</p></body></html>").endswith("</script></body></html>")
    assert probe_result('<pre id="harness-layout">["A &amp; B: 1400 px wide in 1216 px"]</pre>') == [
        "A & B: 1400 px wide in 1216 px"]
    with pytest.raises(HarnessError, match="layout probe left no result"):
        probe_result("<html><body></body></html>")
