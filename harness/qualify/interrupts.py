"""A SIGINT/SIGTERM that reaches the harness during its suites must stop them, even when the KeyboardInterrupt its
handler raises is lost.

The handler raises in whatever Python code the main thread runs at that moment. When that is a finaliser (`__del__`
of a socket or stream the garbage collector is closing, or a weakref callback), Python reports the exception as
unraisable and goes on, and the signal is gone: seen once in CI, a SIGTERM sent mid long_prefix left the run
measuring for minutes. So a noted signal is raised again every few seconds until pytest has taken the interrupt (its
`pytest_keyboard_interrupt` hook, before it tears the servers down) or the suites have ended.

After the suites, signals are only noted (`interrupts_noted`): the run is finished and its report written all the
same, and the exit code is 128 + the signal.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn


class InterruptRelay:
    """Raises a noted signal again every `every_s` seconds, at most `tries` times, until `take()`. Also a pytest
    plugin: registered with pytest.main, its hook marks the interrupt taken."""

    def __init__(self, every_s: float = 2.0, tries: int = 30):
        self.every_s, self.tries = every_s, tries
        self.taken = threading.Event()
        self.resent = 0
        self.relaying = threading.Event()  # set while a signal the relay sent has not reached the handler
        self._thread: threading.Thread | None = None

    def noted(self, signum: int) -> None:
        """Called by the signal handler before it raises: starts the relay, once."""
        if self._thread is None and not self.taken.is_set():
            self._thread = threading.Thread(target=self._relay, args=(signum,), name="interrupt-relay", daemon=True)
            self._thread.start()

    def take(self) -> None:
        """The interrupt has been taken (or the suites are over): no more signals."""
        self.taken.set()

    def _relay(self, signum: int) -> None:
        for _ in range(self.tries):
            if self.taken.wait(self.every_s):
                return
            self.resent += 1
            self.relaying.set()
            os.kill(os.getpid(), signum)

    def still_propagating(self) -> bool:
        """Whether the signal now handled is the relay's while the first KeyboardInterrupt is still being handled
        (unwinding is slow under load: lm-eval's event loop closing): it is not lost, and raising again would land in
        whatever finaliser that unwinding runs, printed as an unraisable traceback (CI saw it)."""
        relayed = self.relaying.is_set()
        self.relaying.clear()
        return relayed and isinstance(sys.exc_info()[1], KeyboardInterrupt)

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.take()


TERMINATED: list[int] = []  # the signals that stopped the suites, the first one deciding the exit code
SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
RELAY = InterruptRelay()


def sigint_interrupts() -> None:
    """SIGINT raises KeyboardInterrupt from here on, however the process was launched. A process started in the
    background by a non-interactive shell (`make qualify &` or `nohup ... &` in a script, a CI step) inherits SIGINT
    ignored, and Python then installs no KeyboardInterrupt handler of its own: such a `qualify` ignored a SIGINT
    until its suites began (admission asks vLLM for seconds), while `interrupts_raised` stopped it during them. The
    entry point (`python -m harness`) calls this first."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise_interrupt(signum, frame):
    # SIGINT (Ctrl-C) and SIGTERM both become KeyboardInterrupt, so pytest tears its fixtures down (servers stop);
    # the signal is remembered for the exit code (130, 143): pytest's own code for an interrupt is 2. The relay
    # raises it again should this KeyboardInterrupt be lost.
    if RELAY.still_propagating():
        return
    TERMINATED.append(signum)
    RELAY.noted(signum)
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def interrupts_raised() -> Iterator[None]:
    """Inside, SIGINT/SIGTERM raise KeyboardInterrupt (noted in TERMINATED); the earlier handlers come back first on
    the way out: a second Ctrl-C must not cut the servers' stop short."""
    noting = {sig: signal.signal(sig, _raise_interrupt) for sig in SIGNAL_NAMES}
    try:
        yield
    finally:
        RELAY.take()
        for sig, handler in noting.items():
            signal.signal(sig, handler)


@contextmanager
def interrupts_noted() -> Iterator[list[int]]:
    """SIGINT/SIGTERM are noted (the list it yields), not raised, inside: writing the report is never cut short.
    A KeyboardInterrupt inside an import leaves the module half-initialised (CI saw `partially initialized module
    'pandas'` and no report after a Ctrl-C), and the report stack imports for seconds."""
    noted: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: noted.append(signum)) for sig in SIGNAL_NAMES}
    try:
        yield noted
    finally:
        # Once interrupted, the process is on its way out with 128 + signal: a further press (a user's second or
        # third Ctrl-C) stays noted up to the exit, else it lands between here and exit and kills it (CI: -2).
        if not noted:
            for sig, handler in old.items():
                signal.signal(sig, handler)


def interrupted_code(code: int) -> int:
    """128 + the signal that stopped the run (SIGINT 130, SIGTERM 143). Without one, pytest's 'interrupted' (2) is
    not a Ctrl-C: pytest ends with it when a suite module fails to import ('Interrupted: 1 error during collection'),
    which printed 'interrupted (SIGINT)' and exit 130 before; it stays 2 (an error, reported as such)."""
    if TERMINATED:
        return 128 + TERMINATED[0]
    return code


def taken_interrupt() -> int:
    """The exit code of a KeyboardInterrupt outside pytest's own handling (collection, start-up): 128 + its signal,
    SIGINT where no handler noted one."""
    if not TERMINATED:
        TERMINATED.append(signal.SIGINT)
    return 128 + TERMINATED[0]


def exit_with(code: int) -> NoReturn:
    """sys.exit(code), also after a handled interrupt. A KeyboardInterrupt that crossed an exec() or eval() of a
    string (dataclasses and namedtuple build their methods that way, so a Ctrl-C during an import can) sets CPython's
    "unhandled Ctrl-C" flag even when the harness then handles it, and the interpreter exits by SIGINT (returncode -2)
    instead of 130: CI saw it once. Any exec of a string starts by clearing that flag (run_eval_code_obj in
    Python/pythonrun.c). The exit code is decided: a further press (a user's third Ctrl-C) is ignored from here, else it
    lands during finalisation, which puts Python-level handlers back to the default, and kills the process (-2)."""
    for sig in SIGNAL_NAMES:
        signal.signal(sig, signal.SIG_IGN)
    exec("")  # noqa: S102
    sys.exit(code)
