"""A PNG of the HTML report through headless Chromium: proof that the page renders, and something to look at."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.config.errors import HarnessError

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def chromium_argv(browser: str, html: Path, png: Path, profile: Path, width: int, height: int) -> list[str]:
    # No network, no first-run, no background services: the report is a local self-contained file.
    return [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={png}",
            f"--window-size={width},{height}", html.resolve().as_uri()]


def take_screenshot(html: Path, png: Path, width: int = 1280, height: int = 4000, timeout_s: float = 120) -> Path:
    browser = find_chromium()
    if browser is None:
        raise HarnessError(f"no Chromium found (looked for {', '.join(BROWSERS)}); `make chromium` installs it")
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="harness-chromium-") as profile:
        try:
            proc = subprocess.run(chromium_argv(browser, html, png, Path(profile), width, height),
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{browser} did not finish the screenshot of {html} in {timeout_s:g} s") from None
    if proc.returncode != 0 or not png.is_file():
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise HarnessError(f"{browser} exited {proc.returncode} without writing {png}:\n{tail}")
    return png
