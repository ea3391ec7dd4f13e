"""A signal whose KeyboardInterrupt is lost (raised inside a finaliser, which Python reports as unraisable and
ignores) still stops the run: the relay raises it again. Without the relay the same process runs on, which is what
CI once saw (a SIGTERM mid long_prefix, the run went on measuring)."""

import os
import signal
import subprocess
import sys

import pytest

from harness.config.paths import REPO_ROOT
from harness.qualify.interrupts import InterruptRelay

LOST_INTERRUPT = """
import gc, os, signal, sys, time
from harness.qualify import interrupts
from harness.qualify.interrupts import InterruptRelay
interrupts.RELAY = InterruptRelay(every_s=0.5, tries=int(sys.argv[1]))
signal.signal(signal.SIGTERM, interrupts._raise_interrupt)

class ClosedByTheCollector:
    def __del__(self):  # the signal lands here: its KeyboardInterrupt is reported as unraisable and dropped
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)

ClosedByTheCollector()
gc.collect()
assert interrupts.TERMINATED == [signal.SIGTERM], interrupts.TERMINATED  # the handler ran ...
try:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # ... and its interrupt was lost: the "suites" go on
        time.sleep(0.05)
    print("ran on", interrupts.RELAY.resent)
except KeyboardInterrupt:
    print("interrupted", interrupts.RELAY.resent)
"""


@pytest.mark.parametrize(("tries", "expected"), [(30, "interrupted 1"), (0, "ran on 0")])
def test_a_lost_interrupt_is_raised_again_until_taken(tries, expected):
    proc = subprocess.run([sys.executable, "-c", LOST_INTERRUPT, str(tries)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected, proc.stdout + proc.stderr
    assert "Exception ignored" in proc.stderr and "KeyboardInterrupt" in proc.stderr  # the first one was lost


def test_a_taken_interrupt_is_not_raised_again():
    relay = InterruptRelay(every_s=0.05, tries=5)
    relay.take()
    relay.noted(15)
    assert relay._thread is None and relay.resent == 0
    relay = InterruptRelay(every_s=10, tries=5)
    relay.noted(15)
    relay.pytest_keyboard_interrupt(excinfo=None)  # pytest took it: the relay stops before its first resend
    relay._thread.join(timeout=5)
    assert not relay._thread.is_alive() and relay.resent == 0


HANDLED_INSIDE_EXEC = """
import os, signal, sys, threading
from harness.qualify.interrupts import exit_with
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    exec("while True:\\n    pass\\n")  # where a dataclass or namedtuple is built, e.g. during an import
except KeyboardInterrupt:
    pass  # handled, as qualify handles it: servers stopped, report rendered
{exit}(130)
"""


@pytest.mark.parametrize(("exit_call", "returncode"), [("exit_with", 130), ("sys.exit", -signal.SIGINT)])
def test_an_interrupt_handled_after_crossing_exec_exits_130_not_by_sigint(tmp_path, exit_call, returncode):
    """CI saw qualify print its interrupted report and still die by SIGINT (-2): the KeyboardInterrupt had crossed an
    exec() of a string. exit_with keeps 130; a plain sys.exit shows the CPython behaviour it guards against. Run as
    `python -m`, as the harness is."""
    (tmp_path / "handled_inside_exec.py").write_text(HANDLED_INSIDE_EXEC.format(exit=exit_call))
    proc = subprocess.run([sys.executable, "-m", "handled_inside_exec"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == returncode, proc.stderr
