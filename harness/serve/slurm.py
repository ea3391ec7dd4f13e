"""SLURM, asked through its own commands (scontrol, squeue, salloc, scancel): the allocation, its nodes, their
addresses, steps by name. I/O only; every failure is a LaunchError saying which command failed and why."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

from harness.config.arms import Arm
from harness.config.errors import LaunchError
from harness.plan.redact import redact_argv
from harness.plan.slurm_nodes import NodeState, parse_sinfo

GRANTED = re.compile(r"Granted job allocation (\d+)")
QUERY_TIMEOUT_S = 30


def run(argv: list[str], timeout: float = QUERY_TIMEOUT_S, stream: str = "stdout") -> str:
    if shutil.which(argv[0]) is None:
        raise LaunchError(f"`{argv[0]}` is not on PATH: this machine is no SLURM client (`make slurm-up` makes a "
                          "local two-node cluster)")
    shown = shlex.join(redact_argv(argv))  # salloc's argv carries the arm's slurm_args
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"`{shown}` gave no answer in {timeout:.0f} s (is slurmctld up?)") from None
    if out.returncode != 0:
        said = out.stderr.strip() or "; ".join(x for x in out.stdout.splitlines() if x.strip() and x[0] != "*")
        raise LaunchError(f"`{shown}` failed (exit {out.returncode}): {said[-500:]}")  # ping: its verdict on stdout
    return getattr(out, stream)


def ask(argv: list[str]) -> str:
    """A question to slurmctld, after `scontrol ping`: ping answers at once, where any other question to a controller
    that is down waits SLURM's message timeout (~10 s) before it fails."""
    if shutil.which("scontrol") is not None:
        try:
            run(["scontrol", "ping"])
        except LaunchError as exc:
            raise LaunchError(f"`{shlex.join(argv)}` not asked: slurmctld does not answer ({exc})") from None
    return run(argv)


def current_allocation() -> str | None:
    """The allocation the harness runs in (salloc's shell, an sbatch script), or None."""
    return os.environ.get("SLURM_JOB_ID") or None


def allocation_nodes(job_id: str) -> list[str]:
    """The allocation's node names in SLURM's order (node 0 first)."""
    nodelist = ask(["squeue", "-h", "-j", job_id, "-o", "%N"]).strip()
    if not nodelist:
        raise LaunchError(f"SLURM allocation {job_id} has no nodes (not running: `squeue -j {job_id}`)")
    return run(["scontrol", "show", "hostnames", nodelist]).split()


def cluster_nodes() -> dict[str, dict[str, str]]:
    """Every node of the cluster -> its scontrol fields (NodeAddr: where its slurmd, and so its servers, are
    reached; NodeHostName: the host it runs on)."""
    out = {}
    for line in ask(["scontrol", "-o", "show", "node"]).splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "NodeName" in fields:
            out[fields["NodeName"]] = fields
    return out


def node_states() -> dict[str, NodeState]:
    """Every node of the cluster with its state and the reason SLURM gives for it."""
    return parse_sinfo(ask(["sinfo", "-N", "-h", "-o", "%N|%P|%T|%E"]))


def job_name(arm: Arm) -> str:
    return f"harness-{arm.name}"


def salloc_argv(arm: Arm, comment: str | None = None) -> list[str]:
    """The allocation the harness asks for when it runs outside one: the arm's nodes, its slurm_args, waiting at most
    launcher.allocation_timeout_s (salloc then withdraws the request); the comment names its owner
    (harness/serve/orphans.py)."""
    argv = ["salloc", "--no-shell", f"--nodes={arm.parallelism.nnodes}", f"--job-name={job_name(arm)}",
            f"--immediate={arm.launcher.allocation_timeout_s}"]
    if comment:
        argv.append(f"--comment={comment}")
    if arm.launcher.nodes:
        argv.append(f"--nodelist={','.join(arm.launcher.nodes)}")
    return argv + list(arm.launcher.slurm_args)


def obtain_allocation(arm: Arm, comment: str) -> str:
    """salloc --no-shell: the job id once granted (it holds the nodes until scancel). A request that is not granted
    in time, or whose wait is interrupted (a signal), is cancelled here: salloc killed while it waits cannot."""
    try:  # salloc's own limit first; this one only if salloc itself hangs
        return granted(run(salloc_argv(arm, comment), arm.launcher.allocation_timeout_s + QUERY_TIMEOUT_S,
                           stream="stderr"))  # salloc reports on stderr
    except BaseException:
        cancel(*requests_of(arm, comment))
        raise


def requests_of(arm: Arm, comment: str) -> list[str]:
    """This user's jobs for this arm that carry exactly this owner comment (this harness's request for the arm; an
    allocation it holds for another arm is not one); none when SLURM cannot tell."""
    try:
        return [job for job, name, text in my_jobs() if name == job_name(arm) and text == comment]
    except LaunchError:
        return []


def granted(text: str) -> str:
    m = GRANTED.search(text)
    if not m:
        raise LaunchError(f"salloc did not grant an allocation: {text.strip()[-500:]}")
    return m.group(1)


def my_jobs() -> list[tuple[str, str, str]]:
    """This user's jobs that are not finished: (job id, name, comment); SLURM shows a job without one as (null)."""
    out = ask(["squeue", "-h", "--me", "-o", "%i|%j|%k"])
    return [(f[0], f[1], f[2]) for f in (line.split("|", 2) for line in out.splitlines()) if len(f) == 3]


def step_ids(job_id: str, name: str) -> list[str]:
    """The running steps (job.step) of an allocation that carry a step name."""
    try:
        lines = ask(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"]).splitlines()
    except LaunchError:
        return []  # the allocation is gone, and its steps with it
    return [line.split()[0] for line in lines if len(line.split()) == 2 and line.split()[1] == name]


def cancel(*targets: str) -> None:
    """scancel: a step gets SIGTERM, then SIGKILL after the cluster's KillWait; an unknown id is not an error."""
    if targets:
        subprocess.run(["scancel", *targets], capture_output=True, timeout=QUERY_TIMEOUT_S)
