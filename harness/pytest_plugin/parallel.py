"""Parallel arms (`qualify --parallel`): one pytest-xdist worker per arm (each arm's tests one work unit:
grouping.ArmScheduling), a GPU lease per server, and waits for exactly what a test needs from another arm's worker: a
comparison gate waits for the reference's tests of its suite, a reference check for the reference's stored outputs.

A wait ends when what it waits for is recorded, or when every other worker has finished (it then never will be: the
gate reads 'no data'). Workers say they finished with a marker file in the run directory."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from harness.config.arms import Arm
from harness.plan.resources import gpus_per_node, lease_pool
from harness.serve.leases import GpuLease, lease_gpus

POLL_S = 0.5


def test_id(nodeid: str) -> str:
    """The node id without xdist's '@group' suffix: records name a test the same in serial and parallel runs."""
    at, bracket = nodeid.rfind("@"), nodeid.rfind("]")
    return nodeid[:at] if at > bracket and "::" in nodeid[:at] else nodeid


def arm_of(nodeid: str, arms: tuple[str, ...], default: str) -> str:
    """The arm a suite test belongs to, from its node id alone (all the xdist controller sees; the one rule for the
    scheduler, the recorded outcome and the test's candidate): the id in brackets where it names an arm of the run --
    a `served_arm` test's arm, or in a run of several candidates a candidate's own test -- else `default` (the
    candidate of a one-candidate run: its comparisons, checks and op suite carry no id)."""
    name = test_id(nodeid).rpartition("::")[2]
    params = name.partition("[")[2].removesuffix("]")
    return params if params in arms else default


def worker_id() -> str | None:
    return os.environ.get("PYTEST_XDIST_WORKER")


def worker_count() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def markers_dir(run_dir: Path) -> Path:
    return run_dir / ".workers"


def mark_worker_done(run_dir: Path) -> None:
    wid = worker_id()
    if wid:
        markers_dir(run_dir).mkdir(parents=True, exist_ok=True)
        (markers_dir(run_dir) / f"{wid}.done").write_text(str(os.getpid()))


def others_done(run_dir: Path) -> bool:
    """Every worker but this one has finished its tests."""
    d = markers_dir(run_dir)
    done = {p.stem for p in d.glob("*.done")} if d.is_dir() else set()
    return len(done - {worker_id()}) >= worker_count() - 1


def wait_until(ready: Callable[[], bool], run_dir: Path) -> bool:
    """Poll `ready` until it holds (True) or every other worker is done (False after one last look)."""
    while not ready():
        if others_done(run_dir):
            return ready()
        time.sleep(POLL_S)
    return True


def host_gpus() -> list[int]:
    """The GPUs leases are drawn from: HARNESS_GPUS (e.g. "0,1"), else every GPU NVML sees (admission checked that
    the run's arms fit them)."""
    return lease_pool()[0]


def leased(arm: Arm) -> tuple[Arm, GpuLease | None]:
    """A GPU arm gets a disjoint GPU set leased for its server (CUDA_VISIBLE_DEVICES); a CPU arm needs none. The wait
    is the arm's own start-up timeout: another worker's server may hold the GPUs that long."""
    if arm.device != "gpu":
        return arm, None
    lease = lease_gpus(gpus_per_node(arm), host_gpus(), arm.name, arm.timeouts.startup_s)
    return arm.model_copy(update={"gpus": lease.gpus}), lease
