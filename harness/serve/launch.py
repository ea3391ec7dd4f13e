"""Launch: an arm becomes a live, healthy server (or a LaunchError saying why not)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm
from harness.config.errors import LaunchError, PreflightError
from harness.config.paths import server_python
from harness.plan.env_policy import log_env_problem
from harness.plan.node_placement import Placement
from harness.plan.nodes import Plan, build_plan
from harness.plan.preflight import violations
from harness.serve import orphans, slurm
from harness.serve.process import Server, free_port
from harness.serve.serverlog import parse_backends, spec_refusal
from harness.serve.slurm_allocation import check_reach, obtain, place
from harness.serve.slurm_steps import Allocation, SlurmServer


@dataclass
class ServerInfo:
    """What the harness learned about a server that came up."""

    base_url: str
    startup_s: float
    backends: list[str]  # attention backends the log says vLLM selected, the target's first
    vllm_version: str | None


@dataclass
class LiveServer:
    arm: Arm
    plan: Plan
    server: Server
    info: ServerInfo


def plan_for(arm: Arm, port: int | None = None, placement: Placement | None = None) -> Plan:
    python = arm.launcher.python or server_python()
    return build_plan(arm, port or arm.server.port or 8000, python, placement)


def preflight_error(plan: Plan) -> PreflightError:
    lines = [f"arm {plan.arm!r} fails preflight (nothing was started):"]
    lines += [f"  {v.rule}: {v.detail}" for v in violations(list(plan.verdicts))]
    return PreflightError("\n".join(lines))


def refused_speculation(arm: Arm, log_text: str, exc: LaunchError) -> LaunchError:
    """A start-up failure of a speculative arm that vLLM explains as a refusal of its speculative config (e.g. spec
    decode with DCP, an open RFC upstream) says so first; any other failure is returned as it was."""
    why = spec_refusal(log_text) if arm.speculative is not None else None
    if why is None:
        return exc
    return LaunchError(f"arm {arm.name!r}: the installed vLLM refused speculative decoding (speculative.method "
                       f"{arm.speculative.method!r}, dcp {arm.parallelism.dcp}): {why}\n{exc}")


def launch(arm: Arm, arm_dir: Path) -> LiveServer:
    """A local server (a Ray arm is one too: vLLM's Ray executor spans the existing cluster from node 0), or one
    srun step per node for a SLURM arm."""
    if arm.launcher.kind == "slurm":
        return launch_slurm(arm, arm_dir)
    if arm.parallelism.nnodes > 1 and arm.launcher.kind != "ray":
        raise LaunchError(f"arm {arm.name!r} spans {arm.parallelism.nnodes} nodes with launcher "
                          f"{arm.launcher.kind!r}: set launcher.kind slurm (one srun step per node) or ray")
    port = arm.server.port or free_port(arm.server.host)
    plan = plan_for(arm, port)
    if not plan.ok:
        raise preflight_error(plan)
    server = Server(arm.name, plan.nodes[0], arm_dir / "server.log", arm.timeouts.startup_s,
                    arm.timeouts.shutdown_s, port, arm.server.host)
    return come_up(arm, plan, server)


def launch_slurm(arm: Arm, arm_dir: Path) -> LiveServer:
    """Inside the current allocation, or one obtained now (salloc, its owner in the job's comment) and cancelled with
    the server. Allocations a dead harness left on this host are cancelled first."""
    orphans.reclaim_orphans()
    allocation, ours = slurm.current_allocation(), None
    try:
        if allocation is None:
            ours = Allocation(obtain(arm, arm_dir.parent.name))  # the run directory's name is the run id
            allocation = ours.job_id
        placement = place(arm, allocation)
        check_reach(placement, slurm.cluster_nodes()[placement.nodes[0]].get("NodeHostName", placement.nodes[0]))
        plan = plan_for(arm, arm.server.port or local_free_port(placement.node0_addr), placement)
    except BaseException:
        if ours is not None:
            ours.stop()
        raise
    if not plan.ok:
        if ours is not None:
            ours.stop()
        raise preflight_error(plan)
    return come_up(arm, plan, SlurmServer(arm, plan, arm_dir, ours))


def local_free_port(addr: str) -> int:
    """A free port where node 0's address is this host's (the local cluster, or the harness on node 0); else the
    vLLM default: a port on a remote node cannot be probed from here (set server.port to choose one)."""
    try:
        return free_port(addr)
    except OSError:
        return 8000


def come_up(arm: Arm, plan: Plan, server) -> LiveServer:
    """Start, wait for /health (every node watched), check the log's env warnings; stopped on any failure."""
    server.start()
    try:
        startup_s, version = server.wait_healthy()
    except LaunchError as exc:
        server.stop()
        raise refused_speculation(arm, server.log_text(), exc) from None
    except BaseException:
        server.stop()
        raise
    info = ServerInfo(plan.base_url, startup_s, parse_backends(server.log_text()), version)
    problem = log_env_problem(server.log_text(), plan.nodes[0].env, version)
    if problem:
        server.stop()
        raise LaunchError(f"arm {arm.name!r}: {problem}")
    return LiveServer(arm, plan, server, info)
