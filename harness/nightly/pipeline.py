"""Arms -> a Buildkite pipeline (a plain dict; the CLI dumps it as YAML). Pure: no I/O beyond loading the arms.

One step per arm group (a candidate with its reference): the step runs scripts/buildkite/qualify_step.sh, which
qualifies the group, annotates the build from the run's annotation.md and exits with qualify's code. Steps are placed
by GPU count (`agents`), serialised per GPU pool (`concurrency_group`), retried when the agent is lost, and their run
directory is kept as artifacts whatever the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm

STEP_SCRIPT = "scripts/buildkite/qualify_step.sh"
# Buildkite reports a lost agent as exit status -1 and a stopped agent (spot reclaim, host shutdown) as the
# agent_stop signal reason; both are the machine's failure, not the build's.
AGENT_LOSS_RETRY = [{"exit_status": -1, "limit": 2}, {"signal_reason": "agent_stop", "limit": 2}]


@dataclass(frozen=True)
class ArmGroup:
    candidate: Arm
    reference: Arm | None

    @property
    def arms(self) -> list[Arm]:
        return [a for a in (self.candidate, self.reference) if a is not None]

    def gpus(self, parallel: bool) -> int:
        """GPUs one host needs: the arms side by side on disjoint GPUs (parallel), else the largest arm."""
        per_arm = [a.parallelism.world_size // a.parallelism.nnodes for a in self.arms if a.device == "gpu"]
        return (sum(per_arm) if parallel else max(per_arm)) if per_arm else 0

    @property
    def nodes(self) -> int:
        return max(a.parallelism.nnodes for a in self.arms)


def arm_groups(arms: list[Arm], references: dict[str, Arm]) -> list[ArmGroup]:
    """Each named arm with its reference; an arm that is another named arm's reference runs inside that group."""
    referenced = {a.reference for a in arms if a.reference}
    return [ArmGroup(a, references.get(a.reference) if a.reference else None) for a in arms
            if a.name not in referenced]


def run_id(arm: Arm, nightly: bool) -> str:
    # ${BUILDKITE_BUILD_NUMBER} is interpolated by Buildkite when the pipeline is uploaded.
    return f"{'nightly' if nightly else 'ci'}-${{BUILDKITE_BUILD_NUMBER}}-{arm.name}"


def step(group: ArmGroup, nightly: bool, queue: str, cpu_queue: str, parallel: bool) -> dict:
    cand = group.candidate
    gpus = group.gpus(parallel)
    pool = f"{queue}-{gpus}gpu" if gpus else cpu_queue
    rid = run_id(cand, nightly)
    vs = f" vs {group.reference.name}" if group.reference else ""
    env = {"HARNESS_RUN_ID": rid, "HARNESS_ARM": cand.name, "CI": "true"}
    if nightly:
        env["HARNESS_BASELINE_FROM"] = "previous-nightly"
    if parallel and len(group.arms) > 1:
        env["HARNESS_PARALLEL"] = "1"
    agents = {"queue": queue, "gpus": str(gpus)} if gpus else {"queue": cpu_queue}
    if group.nodes > 1:
        agents["nodes"] = str(group.nodes)
    startup = sum(a.timeouts.startup_s for a in group.arms)
    return {
        "label": f":vllm: qualify {cand.name}{vs}",
        "key": f"qualify-{cand.name}",
        "command": f"bash {STEP_SCRIPT}",
        "env": env,
        "agents": agents,
        # uploaded by the agent after the command, whether it passed or failed
        "artifact_paths": [f"reports/{rid}/**/*"],
        "retry": {"automatic": [dict(rule) for rule in AGENT_LOSS_RETRY]},  # copies: no YAML anchors
        "concurrency_group": f"dcp-harness/{pool}",
        "concurrency": 1,
        # server loads plus the suites: generous, so a hung server is the harness's timeout, not Buildkite's
        "timeout_in_minutes": int(startup // 60) + 240,
    }


def pipeline(groups: list[ArmGroup], nightly: bool, queue: str = "gpu", cpu_queue: str = "cpu",
             parallel: bool = False) -> dict:
    return {"steps": [step(g, nightly, queue, cpu_queue, parallel) for g in groups]}
