"""Progress and the run log: a live status line per long phase (tqdm) and `<run-dir>/harness.log` (logging).

Status lines go to a terminal the CLI hands over (a duplicate of its stderr, so pytest's output capture cannot
swallow them); without one -- not a TTY, CI=true, the harness's own tests -- every bar is silent. The log gets
every step at INFO with secrets already redacted by the callers. Imports nothing from the harness: any stage may
report progress.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import IO

from tqdm import tqdm

_STREAM: IO[str] | None = None
LOG_NAME = "harness.log"


def enable(stream: IO[str]) -> None:
    global _STREAM
    _STREAM = stream


def disable() -> None:
    global _STREAM
    stream, _STREAM = _STREAM, None
    if stream is not None:
        try:
            stream.close()
        except OSError:
            pass


def bar(desc: str, total: float | None = None, unit: str = "it") -> tqdm:
    """A status line (context manager); disabled unless a terminal was handed over."""
    return tqdm(total=total, desc=desc, unit=unit, file=_STREAM, disable=_STREAM is None, leave=False,
                dynamic_ncols=True, mininterval=0.5, bar_format="{desc}: {n_fmt}/{total_fmt} {unit} [{elapsed}] "
                "{postfix}" if total else "{desc}: {n_fmt} {unit} [{elapsed}] {postfix}")


def start_log(run_dir: Path) -> Path:
    """Send the harness's log records (logger "harness" and below) to <run-dir>/harness.log."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOG_NAME
    logger = logging.getLogger("harness")
    for handler in [h for h in logger.handlers if getattr(h, "harness_run_log", False)]:
        logger.removeHandler(handler)
        handler.close()
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.harness_run_log = True
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return path
