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


# How a non-interactive shell starts a background job (`nohup make test &`, a CI script): SIGINT ignored, which an
# exec keeps. Python then installs no KeyboardInterrupt handler: before the child below set its own, `make test`
# launched that way saw it busy-loop through every SIGINT until the 60 s timeout killed it.
IGNORING_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


def launched_in_the_background(*argv: str) -> list[str]:
    """`python argv...` started with SIGINT ignored, as a non-interactive shell's background job is."""
    return [sys.executable, "-c", IGNORING_SIGINT, *argv]


HANDLED_INSIDE_EXEC = """
import os, signal, sys, threading
from harness.qualify.interrupts import exit_with, sigint_interrupts
print("inherited", "ignored" if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else "default", flush=True)
sigint_interrupts()  # as `python -m harness` does first
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    exec("import time\\nend = time.monotonic() + 10\\nwhile time.monotonic() < end:\\n    pass\\n")
except KeyboardInterrupt:
    pass  # handled, as qualify handles it: servers stopped, report rendered
else:
    sys.exit("no KeyboardInterrupt within 10 s of the SIGINT")
{exit}(130)
"""


@pytest.mark.parametrize(("exit_call", "returncode"), [("exit_with", 130), ("sys.exit", -signal.SIGINT)])
def test_an_interrupt_handled_after_crossing_exec_exits_130_not_by_sigint(tmp_path, exit_call, returncode):
    """CI saw qualify print its interrupted report and still die by SIGINT (-2): the KeyboardInterrupt had crossed an
    exec() of a string. exit_with keeps 130; a plain sys.exit shows the CPython behaviour it guards against. Run as
    `python -m`, as the harness is, and launched with SIGINT ignored whatever launched pytest: the child takes its
    SIGINT because it sets the handler itself, not because pytest ran in a terminal."""
    (tmp_path / "handled_inside_exec.py").write_text(HANDLED_INSIDE_EXEC.format(exit=exit_call))
    proc = subprocess.run(launched_in_the_background("-m", "handled_inside_exec"), cwd=tmp_path, capture_output=True,
                          text=True, timeout=20, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.stdout.startswith("inherited ignored"), proc.stdout + proc.stderr
    assert proc.returncode == returncode, proc.stderr


SIGINT_DURING_A_COMMAND = """
import os, runpy, signal, sys, time
from harness import cli

def slow_arms(args):  # a command the SIGINT reaches before any handler of the harness's own (qualify's admission)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    print("ran on")
    return 0

cli.cmd_arms = slow_arms
sys.argv = ["harness", "arms"]
runpy.run_module("harness", run_name="__main__")  # python -m harness arms
"""


def test_a_harness_command_launched_in_the_background_exits_130_on_sigint():
    """`python -m harness` takes SIGINT as Python's KeyboardInterrupt however it was launched: started by a script's
    `&` it inherited SIGINT ignored, and a `qualify` ignored the signal until its suites set their own handler."""
    proc = subprocess.run(launched_in_the_background("-c", SIGINT_DURING_A_COMMAND), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, proc.stdout + proc.stderr
    assert "interrupted (SIGINT)" in proc.stderr and "ran on" not in proc.stdout, proc.stdout + proc.stderr


def test_a_relayed_signal_is_not_raised_while_the_first_interrupt_is_still_being_handled(monkeypatch):
    from harness.qualify import interrupts

    relay = InterruptRelay(every_s=10, tries=1)
    monkeypatch.setattr(interrupts, "RELAY", relay)
    monkeypatch.setattr(interrupts, "TERMINATED", [])
    with pytest.raises(KeyboardInterrupt):  # the user's signal: raised
        interrupts._raise_interrupt(signal.SIGINT, None)
    try:
        raise KeyboardInterrupt("signal 2")
    except KeyboardInterrupt:  # still unwinding it (a finaliser runs here): the relay's signal is not raised again
        relay.relaying.set()
        interrupts._raise_interrupt(signal.SIGINT, None)
        with pytest.raises(KeyboardInterrupt):  # a user's second Ctrl-C meanwhile still is
            interrupts._raise_interrupt(signal.SIGINT, None)
    relay.relaying.set()
    with pytest.raises(KeyboardInterrupt):  # the first was lost (nothing is being handled): raised again
        interrupts._raise_interrupt(signal.SIGINT, None)
    relay.take()
