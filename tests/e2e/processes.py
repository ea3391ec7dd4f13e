"""Waiting for a test's own processes to be gone (a zombie, exited but not yet reaped, counts as gone)."""

from __future__ import annotations

import time

import psutil


def wait_gone(pids: list[int], timeout: float = 30) -> list[int]:
    """The pids still alive after `timeout` seconds; [] as soon as none is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return []
        time.sleep(0.5)
    return alive
