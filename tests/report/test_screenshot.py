"""The HTML report renders in a real browser: headless Chromium screenshots it (installed by `make chromium`,
which `make test` runs first); the pixels must show the page, not a blank one."""

from __future__ import annotations

import pytest
from reportrun import make_run

from harness.report.render import render_run
from harness.report.screenshot import chromium_argv, find_chromium, take_screenshot

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
