"""The local SLURM cluster's daemons as scripts/slurm_up.sh keeps them (a pid file each in /run/slurm-harness): which
run now, how a test module stops the ones it started, and which of those still run afterwards."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil

from harness.config.paths import REPO_ROOT

PIDDIR = Path("/run/slurm-harness")
SCRIPT = REPO_ROOT / "scripts" / "slurm_up.sh"


def running_daemons(piddir: Path = PIDDIR) -> dict[str, psutil.Process]:
    """Daemon name (slurmctld, slurmd-node1, slurmd-node2, munged) -> its live process; a stale pid file (a dead
    pid, or one given to another program since) is not a running daemon."""
    out = {}
    for pidfile in sorted(piddir.glob("*.pid")):
        try:
            proc = psutil.Process(int(pidfile.read_text().strip()))
            if proc.name().startswith(pidfile.stem.split("-")[0]) and alive(proc):
                out[pidfile.stem] = proc
        except (OSError, ValueError, psutil.Error):
            continue
    return out


def alive(proc: psutil.Process) -> bool:
    """Still running: the same process (pid and start time) and not a zombie (pid 1 may reap nothing here)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def still_running(started: dict[str, psutil.Process], timeout: float = 15) -> list[str]:
    """Those of `started` that have not exited within `timeout`, as 'name (pid N)'."""
    deadline = time.monotonic() + timeout
    while True:
        left = [f"{name} (pid {proc.pid})" for name, proc in started.items() if alive(proc)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def stop(names: list[str], piddir: Path = PIDDIR) -> str:
    """`slurm_up.sh down <names>`: only these daemons; its output, for a failure message."""
    if not names:
        return ""
    out = subprocess.run(["bash", str(SCRIPT), "down", *names], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SLURM_HARNESS_PIDDIR": str(piddir)})
    return out.stdout + out.stderr
