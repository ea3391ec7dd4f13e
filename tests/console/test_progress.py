"""Status lines are silent unless a terminal was handed over; the run log collects the harness's records."""

import io
import logging

from harness.console import progress


def test_bars_are_silent_without_a_terminal_and_count_with_one():
    with progress.bar("quiet", 3, "requests") as bar:
        bar.update(3)
    assert bar.disable
    stream = io.StringIO()
    progress.enable(stream)
    try:
        with progress.bar("cpu-smoke: long_prefix c2", 4, "requests") as bar:
            bar.update(2)
            bar.refresh()
        assert "cpu-smoke: long_prefix c2: 2/4 requests" in stream.getvalue()
    finally:
        progress._STREAM = None  # the StringIO is the test's to keep


def test_run_log_gets_the_harness_records_once_per_run(tmp_path):
    first = progress.start_log(tmp_path / "a")
    logging.getLogger("harness.serve.process").info("arm %s: starting", "cpu-ref")
    second = progress.start_log(tmp_path / "b")  # a second run in one process moves the handler, never doubles it
    logging.getLogger("harness.cli").info("run b")
    assert "arm cpu-ref: starting" in first.read_text() and "run b" not in first.read_text()
    assert second.read_text().count("run b") == 1
