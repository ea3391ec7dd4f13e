"""Placement: which node runs each rank, and the one address by which the harness reaches node 0. Pure.

The rule (docs/arms.md, "Multi-node arms"): the harness runs where it was started -- a login node or inside the
allocation -- and never on a node it does not know. Node 0's server binds exactly node 0's SLURM address (NodeAddr, as
`scontrol show node` gives it), which is also the workers' --master-addr and the address the harness connects to:
reachable from the cluster's own network, nothing wider (never 0.0.0.0). A local arm binds its server.host.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm

WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class Placement:
    nodes: tuple[str, ...]  # node names, node rank order ("localhost" for a local arm)
    node0_addr: str  # what node 0's server binds and the harness connects to
    allocation: str | None = None  # SLURM job id of the steps; None: obtained at launch (or a placeholder)
    harness_host: str = "this host"  # where the harness runs, for the plan's statement


def connect_host(bind: str) -> str:
    """The address the harness connects to for a server bound to `bind` (a wildcard bind is reached on loopback)."""
    return "127.0.0.1" if bind in WILDCARDS else bind


def default_placement(arm: Arm) -> Placement:
    """Before anything is asked of SLURM: named nodes or placeholders; a slurm arm's address is node 0's."""
    nnodes = 1 if arm.launcher.kind == "ray" else arm.parallelism.nnodes
    if arm.launcher.nodes:
        nodes = tuple(arm.launcher.nodes)
    elif arm.launcher.kind == "slurm":
        nodes = tuple(f"<node{r}>" for r in range(nnodes))
    else:
        nodes = ("localhost",) if nnodes == 1 else tuple(f"<node{r}>" for r in range(nnodes))
    if arm.launcher.kind == "slurm":
        return Placement(nodes, "<address of node 0>", None)
    return Placement(nodes, arm.server.host)


def slurm_placement(arm: Arm, nodes: list[str], addresses: dict[str, str], allocation: str | None,
                    harness_host: str) -> Placement:
    """The arm's nodes (its own names, else the allocation's first nnodes) with node 0's SLURM address."""
    chosen = tuple(arm.launcher.nodes or nodes[: arm.parallelism.nnodes])
    return Placement(chosen, addresses.get(chosen[0], chosen[0]), allocation, harness_host)


def statement(arm: Arm, placement: Placement, port: int) -> str:
    """Where the harness runs and how it reaches node 0, as `plan` prints it."""
    url = f"http://{connect_host(placement.node0_addr)}:{port}"
    if arm.launcher.kind != "slurm":
        return f"harness on {placement.harness_host}; server of node 0 binds {placement.node0_addr}, reached at {url}"
    inside = (f"inside SLURM allocation {placement.allocation}" if placement.allocation
              else "outside an allocation: obtains one with salloc at launch (cancelled at the end)")
    return (f"harness on {placement.harness_host}, {inside}; node 0 ({placement.nodes[0]}) binds its SLURM address "
            f"{placement.node0_addr} only (never 0.0.0.0) and the harness reaches it at {url}")


def reach_problem(bind: str, loopback: bool, node0: str, node0_host: str, this_host: str) -> str | None:
    """Why the harness on `this_host` cannot reach node 0's server bound to `bind`, or None. A loopback address is
    only reachable from node 0's own host; a wildcard would open the server to every network of the node."""
    if bind in WILDCARDS:
        return (f"node 0 ({node0}) would bind {bind or 'every interface'}: a multi-node server binds node 0's own "
                "address only")
    if loopback and node0_host != this_host:
        return (f"node 0 ({node0}) has the loopback address {bind}, which only its own host ({node0_host}) reaches; "
                f"the harness runs on {this_host}: run it on {node0_host}, or give the node a NodeAddr this host "
                "can reach")
    return None
