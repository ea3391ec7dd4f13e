"""A multi-node (or SLURM-placed) server: one `srun` step per node inside an allocation, node 0 serving HTTP.

Each step is a local `srun` process (its output is that node's log in the run directory) under the same pdeathsig
and process-group care as a local server. Teardown cancels the steps by name with scancel -- a step whose srun was
killed keeps running otherwise -- waits until squeue no longer lists them, and cancels the allocation when the
harness obtained it. Every object here sits in process.LIVE while it lives, so signals and atexit stop it too.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm
from harness.plan.nodes import NodeCommand, Plan, step_name
from harness.serve import slurm
from harness.serve.process import LIVE, POLL_S, Server

log = logging.getLogger(__name__)
GONE_TIMEOUT_S = 30  # beyond shutdown_s: SLURM's KillWait before its SIGKILL


class Allocation:
    """An allocation the harness obtained (salloc --no-shell); cancelled when the harness is done with it."""

    def __init__(self, job_id: str):
        self.job_id = job_id
        LIVE.add(self)

    def stop(self) -> None:
        slurm.cancel(self.job_id)
        LIVE.discard(self)
        log.info("SLURM allocation %s cancelled", self.job_id)


@dataclass(frozen=True)
class SlurmStep:
    """Where SLURM runs one node's step: its allocation, the step's name (what scancel and squeue find it by) and
    the node."""
    job_id: str
    name: str
    node: str


class StepServer(Server):
    """One node's srun step; stop() cancels the step itself, not only the local srun."""

    def __init__(self, label: str, command: NodeCommand, log_path: Path, where: SlurmStep, arm: Arm, port: int,
                 host: str):
        super().__init__(label, command, log_path, arm.timeouts.startup_s, arm.timeouts.shutdown_s, port, host)
        self.job_id, self.step, self.node = where.job_id, where.name, where.node

    def stop(self) -> None:
        if self.proc is None:
            return
        slurm.cancel(*slurm.step_ids(self.job_id, self.step))
        deadline = time.monotonic() + self.shutdown_timeout_s + GONE_TIMEOUT_S
        while slurm.step_ids(self.job_id, self.step) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        left = slurm.step_ids(self.job_id, self.step)
        if left:
            log.error("SLURM step(s) %s of %s still listed after scancel", left, self.arm)
        super().stop()  # whatever of the local srun's tree remains


class SlurmServer:
    """The steps of one arm, behaving as one server: node 0's log and URL, every node's death."""

    def __init__(self, arm: Arm, plan: Plan, arm_dir: Path, allocation: Allocation | None):
        job = plan.placement.allocation or ""
        self.allocation = allocation
        self.steps = [StepServer(f"{arm.name} node {n.node_rank} ({n.host})", n, node_log(arm_dir, n.node_rank),
                                 SlurmStep(job, step_name(arm, n.node_rank), n.host), arm, plan.port,
                                 plan.placement.node0_addr)
                      for n in plan.nodes]
        self.head = self.steps[0]
        self.log_path = self.head.log_path
        self.base_url = plan.base_url

    def log_text(self) -> str:
        return self.head.log_text()

    def start(self) -> None:
        for step in reversed(self.steps):  # workers first: node 0's engine waits for them, not they for it
            step.start()

    def workers_first(self) -> list[StepServer]:
        # A dead worker takes node 0's engine down with it: the worker is the cause to report.
        return [*self.steps[1:], self.head]

    def check_alive(self) -> None:
        for step in self.workers_first():
            step.check_alive()

    def death(self) -> str | None:
        for step in self.workers_first():
            why = step.death()
            if why:
                return f"srun {why} on node {step.command.node_rank} ({step.node})"
        return None

    def wait_healthy(self) -> tuple[float, str | None]:
        return self.head.wait_healthy(watch=lambda: [s.check_alive() for s in self.steps[1:]])

    def pids(self) -> list[int]:
        return [pid for s in self.steps for pid in s.pids()]

    def stop(self) -> None:
        for step in self.steps:
            step.stop()
        if self.allocation is not None:
            self.allocation.stop()


def node_log(arm_dir: Path, rank: int) -> Path:
    """server.log for node 0 (what the suites parse, as for a local arm), server-node<k>.log for the others."""
    return arm_dir / ("server.log" if rank == 0 else f"server-node{rank}.log")

