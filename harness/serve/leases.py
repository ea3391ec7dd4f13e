"""GPU leases: one lock file per GPU, so servers started by parallel workers (or by two runs on one host) get disjoint
GPU sets. The lock is an flock (filelock): the kernel drops it when the holder exits in any way, kill -9 included, so
a dead holder's lease is free again at once; the holder file beside it (pid, arm, since) only explains a wait."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from harness.config.errors import LaunchError


def lease_dir() -> Path:
    """Per host, shared by every run on it: HARNESS_LEASE_DIR, else /tmp/harness-gpu-leases."""
    return Path(os.environ.get("HARNESS_LEASE_DIR", "/tmp/harness-gpu-leases"))


@dataclass
class GpuLease:
    gpus: list[int]
    locks: list[FileLock] = field(default_factory=list, repr=False)

    def release(self) -> None:
        for lock in self.locks:
            lock.release(force=True)
        self.locks.clear()


def holder(directory: Path, gpu: int) -> str:
    """Who holds (or last held) a GPU's lease, for the message of a lease that cannot be had."""
    try:
        h = json.loads((directory / f"gpu{gpu}.holder").read_text())
    except (OSError, ValueError):
        return f"gpu {gpu}: held (holder unknown)"
    alive = pid_alive(h.get("pid", -1))
    return f"gpu {gpu}: held by pid {h.get('pid')} ({h.get('arm')}, since {h.get('since')}" + \
        ("" if alive else ", that pid is gone") + ")"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def try_lease(count: int, gpus: list[int], directory: Path, arm: str) -> GpuLease | None:
    """`count` free GPUs of `gpus` (lowest first), locked now; None when fewer are free (nothing held then)."""
    directory.mkdir(parents=True, exist_ok=True)
    lease = GpuLease([])
    for gpu in gpus:
        if len(lease.gpus) == count:
            break
        lock = FileLock(directory / f"gpu{gpu}.lock", timeout=0, thread_local=False, is_singleton=False)
        try:
            lock.acquire()
        except Timeout:
            continue
        lease.gpus.append(gpu)
        lease.locks.append(lock)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "arm": arm, "since": time.strftime("%H:%M:%S")}
        (directory / f"gpu{gpu}.holder").write_text(json.dumps(record))
    if len(lease.gpus) < count:
        lease.release()
        return None
    return lease


def lease_gpus(count: int, gpus: list[int], arm: str, timeout_s: float, directory: Path | None = None,
               poll_s: float = 1.0) -> GpuLease:
    """Wait up to `timeout_s` for `count` of `gpus` to be free together; LaunchError naming the holders if not."""
    directory = directory or lease_dir()
    if count > len(gpus):
        raise LaunchError(f"arm {arm!r} needs {count} GPU(s); this host has {len(gpus)}")
    deadline = time.monotonic() + timeout_s
    while True:
        lease = try_lease(count, gpus, directory, arm)
        if lease is not None:
            return lease
        if time.monotonic() >= deadline:
            held = "; ".join(holder(directory, g) for g in gpus)
            raise LaunchError(f"arm {arm!r}: no {count} free GPU(s) of {gpus} after {timeout_s:.0f} s ({held}); "
                              f"leases in {directory}")
        time.sleep(poll_s)
