"""Ctrl-C while a report is rendered: `harness report` of a stored run gets SIGINT (three times, as an impatient user
presses it) once it is writing tables; it finishes the report and exits 130. No server: the run is a stored one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from reportrun import make_run

from harness.config.paths import REPO_ROOT


def test_ctrl_c_while_rendering_finishes_the_report_and_exits_130(tmp_path):
    run = make_run(tmp_path, "stored")
    assert not (run / "tables").exists() and not (run / "report.html").exists()
    proc = subprocess.Popen([sys.executable, "-m", "harness", "report", "--run", str(run)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    deadline = time.monotonic() + 120
    while not (run / "tables").exists():  # the report stack is imported and the tables are being written
        assert proc.poll() is None and time.monotonic() < deadline, "rendering ended before any interrupt"
        time.sleep(0.005)
    for _ in range(3):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted (SIGINT) while the report was written; it was finished" in err  # it landed while rendering
    assert "Traceback" not in err
    assert (run / "report.html").read_text().rstrip().endswith("</html>")
    assert (run / "annotation.md").read_text().startswith("## DCP qualification")
    assert f"report: {run / 'report.html'}" in out


def test_a_press_after_the_report_is_written_is_noted_up_to_the_exit():
    """The race CI hit (exit -2): of three presses 50 ms apart, the last landed after rendering had restored the
    default handler. Once one press is noted, later ones stay noted until the process exits with 130."""
    from harness.qualify.interrupts import interrupts_noted

    try:
        with interrupts_noted() as noted:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # with the default handler back, this raises KeyboardInterrupt
        time.sleep(0.01)
        assert noted == [signal.SIGINT, signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_without_a_press_the_handlers_are_given_back():
    from harness.qualify.interrupts import interrupts_noted

    before = signal.getsignal(signal.SIGINT)
    with interrupts_noted() as noted:
        pass
    assert noted == [] and signal.getsignal(signal.SIGINT) is before


def test_pytest_interrupted_without_a_signal_is_no_ctrl_c(monkeypatch):
    """pytest ends with 'interrupted' (2) when a suite module fails to import; with no signal received that is an
    error, not 130 and 'interrupted (SIGINT)' (what a broken import printed before)."""
    from harness.qualify import interrupts

    monkeypatch.setattr(interrupts, "TERMINATED", [])
    assert interrupts.interrupted_code(2) == 2 and interrupts.interrupted_code(1) == 1
    monkeypatch.setattr(interrupts, "TERMINATED", [signal.SIGINT])
    assert interrupts.interrupted_code(2) == 130
    monkeypatch.setattr(interrupts, "TERMINATED", [signal.SIGTERM])
    assert interrupts.interrupted_code(0) == 143
