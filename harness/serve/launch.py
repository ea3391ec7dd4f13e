"""Launch: an arm becomes a live, healthy server (or a LaunchError saying why not)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm
from harness.config.errors import LaunchError, PreflightError
from harness.config.paths import server_python
from harness.plan.env_policy import log_env_problem
from harness.plan.nodes import Plan, build_plan
from harness.plan.preflight import violations
from harness.serve.process import Server, free_port
from harness.serve.serverlog import parse_backends, spec_refusal


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


def plan_for(arm: Arm, port: int | None = None) -> Plan:
    python = arm.launcher.python or server_python()
    return build_plan(arm, port or arm.server.port or 8000, python)


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
    if arm.launcher.kind != "local" or arm.parallelism.nnodes > 1:
        raise LaunchError(
            f"arm {arm.name!r} needs launcher {arm.launcher.kind!r} over {arm.parallelism.nnodes} node(s); "
            "this harness starts local single-node arms itself. Print the node commands with "
            f"`python -m harness plan --arm {arm.name}` and start them through SLURM or Ray")
    port = arm.server.port or free_port(arm.server.host)
    plan = plan_for(arm, port)
    if not plan.ok:
        raise preflight_error(plan)
    server = Server(arm.name, plan.nodes[0], arm_dir / "server.log", arm.timeouts.startup_s,
                    arm.timeouts.shutdown_s, port, arm.server.host)
    server.start()
    try:
        startup_s, version = server.wait_healthy()
    except LaunchError as exc:
        server.stop()
        raise refused_speculation(arm, server.log_text(), exc) from None
    except BaseException:
        server.stop()
        raise
    info = ServerInfo(server.base_url, startup_s, parse_backends(server.log_text()), version)
    problem = log_env_problem(server.log_text(), plan.nodes[0].env, version)
    if problem:
        server.stop()
        raise LaunchError(f"arm {arm.name!r}: {problem}")
    return LiveServer(arm, plan, server, info)

