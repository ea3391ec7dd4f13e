"""SLURM node states, and whether the allocation an arm asks for can be granted. Pure.

The states are sinfo's (`sinfo -N -h -o '%N|%P|%T|%E'`: node, partition -- '*' marks the default one --, long state,
reason). sinfo appends '*' to the state of a node whose slurmd does not respond. salloc asking for a node that is down,
drained, failed, not responding or never registered (unknown) waits in the queue for it without a word, so the
harness fails the arm before it asks, naming the nodes and their states.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm

# Base states (suffix removed, lower case) in which SLURM gives a node to no new job; "absent" is the harness's own,
# for a named node that sinfo does not list.
UNUSABLE = frozenset({"down", "drain", "drained", "draining", "fail", "failing", "unknown", "unk", "inval", "future",
                      "absent"})
SUFFIXES = "*~#!%$@^-"  # state flags sinfo appends: '*' not responding, '~' powered off, '#' powering up, ...
LOCAL_CLUSTER_HINT = "on the local two-node cluster `make slurm-up` restarts its slurmd and resumes drained nodes"


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # sinfo's long form with its suffix: idle, mixed, drained, down*, unknown*
    reason: str = "none"  # why SLURM set the state; sinfo says "none" when there is none
    partitions: tuple[str, ...] = ()
    default_partition: bool = False  # in the cluster's default partition

    @property
    def not_responding(self) -> bool:
        return "*" in self.state

    @property
    def usable(self) -> bool:
        return not self.not_responding and self.state.rstrip(SUFFIXES).lower() not in UNUSABLE

    def describe(self) -> str:
        """'node2 drained (test)', 'node1 unknown* (not responding)', 'node1 idle'."""
        why = self.reason if self.reason not in ("", "none") else ("not responding" if self.not_responding else "")
        return f"{self.name} {self.state}" + (f" ({why})" if why else "")


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """sinfo -N -h -o '%N|%P|%T|%E' -> node name -> its state; a node in several partitions is listed once each."""
    out: dict[str, NodeState] = {}
    for line in text.splitlines():
        fields = line.strip().split("|", 3)
        if len(fields) < 3 or not fields[0]:
            continue
        name, partition, state = fields[0], fields[1], fields[2]
        reason = fields[3].strip() if len(fields) == 4 else "none"
        prev = out.get(name)
        parts = (*(prev.partitions if prev else ()), partition.rstrip("*"))
        default = partition.endswith("*") or (prev.default_partition if prev else False)
        out[name] = NodeState(name, state, reason, parts, default)
    return out


def requested_partitions(slurm_args: list[str]) -> list[str]:
    """The partitions salloc's arguments ask for (-p/--partition, a comma list); empty: the default partition."""
    out: list[str] = []
    for i, arg in enumerate(slurm_args):
        value = None
        if arg.startswith("--partition="):
            value = arg.split("=", 1)[1]
        elif arg in ("--partition", "-p") and i + 1 < len(slurm_args):
            value = slurm_args[i + 1]
        elif arg.startswith("-p") and len(arg) > 2 and not arg.startswith("--"):
            value = arg[2:]
        if value is not None:
            out = [p for p in value.split(",") if p]  # the last one given wins, as in salloc
    return out


def candidates(arm: Arm, states: dict[str, NodeState]) -> list[NodeState]:
    """The nodes the arm's allocation can come from: its named nodes, else the requested (or default) partition's."""
    if arm.launcher.nodes:
        return [states.get(n, NodeState(n, "absent", "not in this cluster")) for n in arm.launcher.nodes]
    wanted = requested_partitions(arm.launcher.slurm_args)
    if wanted:
        return [s for s in states.values() if set(wanted) & set(s.partitions)]
    default = [s for s in states.values() if s.default_partition]
    return default or list(states.values())


def allocation_blocker(arm: Arm, states: dict[str, NodeState]) -> str | None:
    """Why salloc could not grant the arm's nodes now (down, drained, not responding, ...), or None."""
    pool = candidates(arm, states)
    bad = [s for s in pool if not s.usable]
    if arm.launcher.nodes:
        if not bad:
            return None
        need = f"needs SLURM node(s) that cannot be allocated now: {', '.join(s.describe() for s in bad)}"
    else:
        usable = len(pool) - len(bad)
        if usable >= arm.parallelism.nnodes:
            return None
        partitions = requested_partitions(arm.launcher.slurm_args)
        where = f"partition {','.join(partitions)}" if partitions else "the default partition"
        need = (f"needs {arm.parallelism.nnodes} SLURM node(s) of {where}, which has {usable} usable now: "
                f"{', '.join(s.describe() for s in pool) or 'no nodes'}")
    names = ",".join(s.name for s in bad) or "<node>"
    return (f"arm {arm.name!r} {need}. salloc would wait for them without end, so the harness asked for nothing. "
            f"Check their slurmd (its log, e.g. /var/log/slurm/slurmd-<node>.log; `scontrol show node {names}`) and "
            f"return them to service (`scontrol update nodename={names} state=resume`); {LOCAL_CLUSTER_HINT}")


def describe_all(states: dict[str, NodeState]) -> str:
    return ", ".join(s.describe() for s in states.values()) or "no nodes"
