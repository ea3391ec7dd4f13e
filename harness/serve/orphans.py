"""Allocations whose harness is gone: each obtained allocation names its owner (host, pid, start, run id) in the job's
comment, and the next launch cancels those whose owner on this host no longer exists (a SIGKILLed harness cannot).
An owner on another host is never judged."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from harness.config.errors import LaunchError
from harness.serve import slurm

log = logging.getLogger(__name__)
TAG = "harness-owner"
START_TOLERANCE_S = 1.0  # the start time is stored in whole seconds


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: int  # the process's start time (epoch seconds): a reused pid names a younger process
    run: str

    def comment(self) -> str:
        return f"{TAG} host={self.host} pid={self.pid} start={self.start} run={self.run}"


@dataclass(frozen=True)
class Job:
    job_id: str
    name: str
    comment: str


def this_process(run_id: str) -> Owner:
    start = int(psutil.Process().create_time())
    return Owner(socket.gethostname(), os.getpid(), start, run_id)


def parse_owner(comment: str) -> Owner | None:
    """The owner a harness wrote into a job's comment; None for any other comment (a job the harness did not make)."""
    words = comment.split()
    if not words or words[0] != TAG:
        return None
    fields = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    try:
        return Owner(fields["host"], int(fields["pid"]), int(fields["start"]), fields.get("run", "?"))
    except (KeyError, ValueError):
        return None


def process_alive(pid: int, start: int) -> bool:
    """A process with this pid that started when the owner did (not a later process given the same pid)."""
    try:
        return abs(psutil.Process(pid).create_time() - start) <= START_TOLERANCE_S
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # it exists but cannot be read: not ours to judge dead


def orphaned(jobs: list[Job], host: str, alive: Callable[[int, int], bool]) -> list[tuple[Job, Owner]]:
    """The jobs a harness on `host` made whose owning process no longer exists."""
    out = []
    for job in jobs:
        owner = parse_owner(job.comment)
        if owner is not None and owner.host == host and not alive(owner.pid, owner.start):
            out.append((job, owner))
    return out


def reclaim_orphans() -> list[str]:
    """Cancel this user's allocations left by a dead harness on this host; the job ids cancelled, each logged."""
    jobs = [Job(*row) for row in slurm.my_jobs()]
    stale = orphaned(jobs, socket.gethostname(), process_alive)
    for job, owner in stale:
        slurm.cancel(job.job_id)
        log.warning("SLURM allocation %s (%s) cancelled: its owner, harness pid %d on %s (run %s), no longer "
                    "exists", job.job_id, job.name, owner.pid, owner.host, owner.run)
    return [job.job_id for job, _ in stale]


def main() -> int:
    """`python -m harness.serve.orphans` (make slurm-down runs it first): cancel what dead harnesses left."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        cancelled = reclaim_orphans()
    except LaunchError as e:
        print(f"no stale allocations reclaimed: {e}")
        return 0  # no cluster answering: nothing of ours can be queued there
    print(f"stale allocations cancelled: {', '.join(cancelled) if cancelled else 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
