"""Placing a SLURM arm: the allocation (the current one, or one obtained with salloc), its nodes, node 0's address,
and the launch-time check that the harness reaches that address. Also the verdicts `plan`/`qualify` show before
anything starts (unknown node names, no allocation and nothing to ask one with: exit 2)."""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket

from harness.config.arms import Arm, defining_file
from harness.config.errors import LaunchError
from harness.plan.node_placement import Placement, reach_problem, slurm_placement
from harness.plan.preflight import Verdict
from harness.plan.redact import redact_argv
from harness.plan.slurm_nodes import allocation_blocker, describe_all
from harness.serve import orphans, slurm


def resolve(addr: str) -> str:
    try:
        return socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as exc:
        raise LaunchError(f"node 0's address {addr!r} does not resolve on this host ({exc.strerror})") from None


def place(arm: Arm, allocation: str) -> Placement:
    """The arm's nodes inside `allocation`, node 0's NodeAddr resolved to the address its server binds."""
    nodes = slurm.allocation_nodes(allocation)
    missing = [n for n in arm.launcher.nodes if n not in nodes]
    if missing:
        raise LaunchError(f"arm {arm.name!r}: field launcher.nodes: {', '.join(missing)} not in SLURM allocation "
                          f"{allocation} (its nodes: {', '.join(nodes)})")
    if len(arm.launcher.nodes or nodes) < arm.parallelism.nnodes:
        raise LaunchError(f"arm {arm.name!r} needs {arm.parallelism.nnodes} nodes; SLURM allocation {allocation} "
                          f"has {len(nodes)} ({', '.join(nodes)})")
    info = slurm.cluster_nodes()
    addrs = {name: resolve(f.get("NodeAddr", name)) for name, f in info.items()}
    return slurm_placement(arm, nodes, addrs, allocation, socket.gethostname())


def check_reach(placement: Placement, node0_host: str) -> None:
    """Launch-time check of node_placement.py's rule: the harness reaches node 0's bind address from here."""
    addr = placement.node0_addr
    problem = reach_problem(addr, ipaddress.ip_address(addr).is_loopback, placement.nodes[0], node0_host,
                            socket.gethostname())
    if problem is None:
        try:  # a route to it (UDP connect sends nothing)
            with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((addr, 9))
        except OSError as exc:
            problem = f"no route from this host to node 0's address {addr} ({exc.strerror})"
    if problem:
        raise LaunchError(problem)


def refusal_command(arm: Arm) -> str:
    """What to run instead when the harness may not obtain an allocation itself."""
    return shlex.join(["salloc", f"--nodes={arm.parallelism.nnodes}", "<partition/account/time options>",
                       "python", "-m", "harness", "qualify", "--arm", arm.name])


def obtain(arm: Arm, run_id: str) -> str:
    """Outside an allocation: the arm's nodes are checked first -- down, drained or not responding fails the arm now,
    not after a silent wait in the queue -- then salloc waits at most launcher.allocation_timeout_s for them."""
    problem = allocation_blocker(arm, slurm.node_states())
    if problem:
        raise LaunchError(problem)
    try:
        return slurm.obtain_allocation(arm, orphans.this_process(run_id).comment())
    except LaunchError as exc:
        raise LaunchError(f"arm {arm.name!r}: no SLURM allocation (salloc waits at most "
                          f"{arm.launcher.allocation_timeout_s} s: launcher.allocation_timeout_s; its request was "
                          f"cancelled): {exc}. Nodes now: {states_now()}") from None


def states_now() -> str:
    try:
        return describe_all(slurm.node_states())
    except LaunchError as exc:
        return f"unknown ({exc})"


def allocation_verdict(arm: Arm) -> Verdict:
    allocation = slurm.current_allocation()
    if allocation:
        return Verdict("slurm_allocation", True, f"inside allocation {allocation} (SLURM_JOB_ID)")
    if arm.launcher.slurm_args or arm.launcher.nodes:
        owner = f"{orphans.TAG} host=<this host> pid=<harness pid> start=<its start time> run=<run id>"
        salloc = shlex.join(redact_argv(slurm.salloc_argv(arm, owner)))
        return Verdict("slurm_allocation", True, f"obtains one at launch, waiting at most "
                       f"{arm.launcher.allocation_timeout_s} s (launcher.allocation_timeout_s): {salloc}")
    return Verdict("slurm_allocation", False, (
        f"arm {arm.name!r} ({defining_file(arm, 'launcher')}): outside a SLURM allocation with neither "
        "launcher.nodes nor launcher.slurm_args, so the harness has nothing to ask for; run it inside one: "
        f"`{refusal_command(arm)}`, or set launcher.slurm_args (e.g. ['--partition=gpu', '--time=2:00:00'])"))


_ADMISSION_NODES: list = []  # [nodes or LaunchError], once per process


def admission_nodes() -> dict[str, dict[str, str]]:
    """The cluster's nodes as admission sees them, asked once per process (a silent controller costs SLURM's message
    timeout per question); launch asks again."""
    if not _ADMISSION_NODES:
        try:
            _ADMISSION_NODES.append(slurm.cluster_nodes())
        except LaunchError as exc:
            _ADMISSION_NODES.append(exc)
    if isinstance(_ADMISSION_NODES[0], LaunchError):
        raise _ADMISSION_NODES[0]
    return _ADMISSION_NODES[0]


def slurm_verdicts(arm: Arm) -> list[Verdict]:
    """Before anything starts: the SLURM client answers, the arm's node names exist, an allocation is there or can
    be asked for."""
    if arm.launcher.kind == "ray":
        address = arm.launcher.ray_address or os.environ.get("RAY_ADDRESS")
        return [Verdict("ray_cluster", bool(address), f"existing Ray cluster at {address}" if address else
                        "launcher.kind ray runs on an existing Ray cluster: set launcher.ray_address or RAY_ADDRESS "
                        "(the harness never starts or stops one)")]
    if arm.launcher.kind != "slurm":
        return []
    out = [allocation_verdict(arm)]  # first: it needs no cluster, so the refusal reads the same without one
    try:
        known = admission_nodes()
    except LaunchError as exc:
        return [*out, Verdict("slurm_cluster", False, str(exc))]
    out.append(Verdict("slurm_cluster", True, f"{len(known)} node(s): {states_now()}"))
    unknown = [n for n in arm.launcher.nodes if n not in known]
    where = f"{defining_file(arm, 'launcher')}: field launcher.nodes"
    out.append(Verdict("slurm_nodes_known", not unknown, (
        f"{where}: unknown SLURM node(s) {', '.join(unknown)}; this cluster has {', '.join(known)}") if unknown
        else f"nodes {', '.join(arm.launcher.nodes) or '(from the allocation)'}"))
    return out


def preview(arm: Arm) -> Placement | None:
    """The placement `plan` can show before launch: the current allocation's (or the named) nodes with their real
    addresses; None when SLURM cannot tell (the plan then shows placeholders)."""
    if arm.launcher.kind != "slurm":
        return None
    allocation = slurm.current_allocation()
    try:
        nodes = slurm.allocation_nodes(allocation) if allocation else list(arm.launcher.nodes)
        if len(arm.launcher.nodes or nodes) < arm.parallelism.nnodes:
            return None
        info = admission_nodes()
        addrs = {name: resolve(f.get("NodeAddr", name)) for name, f in info.items()}
    except LaunchError:
        return None
    return slurm_placement(arm, nodes, addrs, allocation, socket.gethostname())
