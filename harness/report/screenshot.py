"""A PNG of the HTML report through headless Chromium: proof that the page renders, and something to look at; and
its layout at the same width: every table must fit the page (a cut column is a column nobody reads)."""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.config.errors import HarnessError

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PAGE_WIDTH = 1280  # px: a laptop's browser window, the width the report is read at

# Run in a copy of the page after layout: each table whose box it overflows (or that reaches past the page), named by
# its data-table or the heading above it, and the page itself where anything makes it scroll sideways.
PROBE = """<script>(function () {
  var page = document.documentElement.clientWidth, out = [];
  function named(t) {
    var box = t.closest("[data-table]");
    if (box) return box.getAttribute("data-table");
    for (var e = t.closest(".tbl") || t; e; e = e.previousElementSibling)
      if (/^H[1-6]$/.test(e.tagName)) return e.textContent.trim();
    return "a table";
  }
  document.querySelectorAll("table").forEach(function (t) {
    var box = t.parentElement, w = Math.ceil(t.getBoundingClientRect().width);
    if (w > box.clientWidth + 1 || t.getBoundingClientRect().right > page + 1)
      out.push(named(t) + ": " + w + " px wide in " + box.clientWidth + " px");
  });
  if (document.documentElement.scrollWidth > page + 1)
    out.push("the page: " + document.documentElement.scrollWidth + " px wide in " + page + " px");
  var pre = document.createElement("pre");
  pre.id = "harness-layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();</script>"""
PROBE_OUT = re.compile(r'<pre id="harness-layout">(.*?)</pre>', re.S)


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def chromium_argv(browser: str, html: Path, png: Path, profile: Path, width: int, height: int,
                  action: str | None = None) -> list[str]:
    """Headless Chromium on a local file: `action` is --dump-dom, else a screenshot into `png`."""
    # No network, no first-run, no background services: the report is a local self-contained file.
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", action or f"--screenshot={png}",
            f"--window-size={width},{height}", html.resolve().as_uri()]


def run_chromium(html: Path, png: Path, width: int, height: int, timeout_s: float,
                 action: str | None = None) -> subprocess.CompletedProcess:
    browser = find_chromium()
    if browser is None:
        raise HarnessError(f"no Chromium found (looked for {', '.join(BROWSERS)}); `make chromium` installs it")
    with tempfile.TemporaryDirectory(prefix="harness-chromium-") as profile:
        try:
            return subprocess.run(chromium_argv(browser, html, png, Path(profile), width, height, action),
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{browser} did not finish with {html} in {timeout_s:g} s") from None


def take_screenshot(html: Path, png: Path, width: int = PAGE_WIDTH, height: int = 4000,
                    timeout_s: float = 120) -> Path:
    png.unlink(missing_ok=True)
    proc = run_chromium(html, png, width, height, timeout_s)
    if proc.returncode != 0 or not png.is_file():
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise HarnessError(f"Chromium exited {proc.returncode} without writing {png}:\n{tail}")
    return png


def probed(page: str) -> str:
    """The page with the layout probe run last (pure)."""
    at = page.rfind("</body>")
    return page[:at] + PROBE + page[at:] if at >= 0 else page + PROBE


def probe_result(dom: str) -> list[str]:
    """The probe's findings from Chromium's --dump-dom output (pure); a DOM without them is an error: the page did
    not load or the probe did not run, and a silent pass would hide it."""
    m = PROBE_OUT.search(dom)
    if m is None:
        raise HarnessError("the layout probe left no result: Chromium did not run the page's script")
    return json.loads(htmllib.unescape(m[1]))


def overflowing_tables(html: Path, width: int = PAGE_WIDTH, timeout_s: float = 120) -> list[str]:
    """Each table wider than the page at `width` px, named: 'Performance: 1,512 px wide in 1,216 px'; [] when
    everything fits. Measured by headless Chromium on a copy of the page with PROBE added."""
    with tempfile.TemporaryDirectory(prefix="harness-layout-") as tmp:
        copy = Path(tmp) / html.name
        copy.write_text(probed(html.read_text()))
        proc = run_chromium(copy, Path(tmp) / "unused.png", width, 900, timeout_s, "--dump-dom")
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise HarnessError(f"Chromium exited {proc.returncode} laying out {html}:\n{tail}")
    return probe_result(proc.stdout)


def screenshot_lines(html: Path, png: Path) -> list[str]:
    """`harness report --screenshot`'s output: the PNG's path, and whether every table fits the page."""
    wide = overflowing_tables(html)
    fits = [f"layout: every table fits {PAGE_WIDTH} px"] if not wide else \
        [f"layout: wider than the page at {PAGE_WIDTH} px: {w}" for w in wide]
    return [f"screenshot: {take_screenshot(html, png)}", *fits]
