"""A SIGINT/SIGTERM that reaches the harness during its suites must stop them, even when the KeyboardInterrupt its
handler raises is lost.

The handler raises in whatever Python code the main thread runs at that moment. When that is a finaliser (`__del__`
of a socket or stream the garbage collector is closing, or a weakref callback), Python reports the exception as
unraisable and goes on, and the signal is gone: seen once in CI, a SIGTERM sent mid long_prefix left the run
measuring for minutes. So a noted signal is raised again every few seconds until pytest has taken the interrupt (its
`pytest_keyboard_interrupt` hook, before it tears the servers down) or the suites have ended.
"""

from __future__ import annotations

import os
import threading


class InterruptRelay:
    """Raises a noted signal again every `every_s` seconds, at most `tries` times, until `take()`. Also a pytest
    plugin: registered with pytest.main, its hook marks the interrupt taken."""

    def __init__(self, every_s: float = 2.0, tries: int = 30):
        self.every_s, self.tries = every_s, tries
        self.taken = threading.Event()
        self.resent = 0
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
            os.kill(os.getpid(), signum)

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.take()
