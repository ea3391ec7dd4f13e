"""Arms -> a Buildkite pipeline (a plain dict; the CLI dumps it as YAML). Pure: no I/O beyond loading the arms.

One step per arm group (candidates linked by their references, so a shared reference starts once), running
scripts/buildkite/qualify_step.sh; placed by GPU count, serialised per GPU pool, retried on a lost agent, its run
directory kept as artifacts (docs/nightly.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm
from harness.config.armset import ArmSet, Pair

STEP_SCRIPT = "scripts/buildkite/qualify_step.sh"
# Buildkite reports a lost agent as exit status -1 and a stopped agent (spot reclaim, host shutdown) as the
# agent_stop signal reason; both are the machine's failure, not the build's.
AGENT_LOSS_RETRY = [{"exit_status": -1, "limit": 2}, {"signal_reason": "agent_stop", "limit": 2}]


@dataclass(frozen=True)
class ArmGroup:
    candidates: tuple[Arm, ...]
    arms: tuple[Arm, ...]  # every arm the group's run starts: candidates, then references that are no candidate

    @property
    def key(self) -> str:
        """The group's name in step keys, run ids and annotation contexts: its candidates, joined."""
        return "_".join(a.name for a in self.candidates)

    def gpus(self, parallel: bool) -> int:
        """GPUs one host needs: the arms side by side on disjoint GPUs (parallel), else the largest arm."""
        per_arm = [a.parallelism.world_size // a.parallelism.nnodes for a in self.arms if a.device == "gpu"]
        return (sum(per_arm) if parallel else max(per_arm)) if per_arm else 0

    @property
    def nodes(self) -> int:
        return max(a.parallelism.nnodes for a in self.arms)


def arm_groups(arm_set: ArmSet, arms: dict[str, Arm]) -> list[ArmGroup]:
    """The run's pairs split into steps: candidates linked through a reference share one; pairs of different node
    counts stay apart (a multi-node step holds its allocation for its whole run). `arms`: every arm, loaded."""
    def nodes(pair: Pair) -> int:
        return max(arms[n].parallelism.nnodes for n in (pair.candidate, pair.reference) if n)

    def names(pairs: list[Pair]) -> set[str]:
        return {n for p in pairs for n in (p.candidate, p.reference) if n}

    groups: list[list[Pair]] = []
    for pair in arm_set.pairs:
        touching = [g for g in groups if nodes(g[0]) == nodes(pair) and names(g) & names([pair])]
        groups = [g for g in groups if g not in touching] + [[p for g in touching for p in g] + [pair]]
    order = {name: i for i, name in enumerate(arm_set.candidates)}
    out = []
    for group in sorted(groups, key=lambda g: min(order[p.candidate] for p in g)):
        cands = sorted((p.candidate for p in group), key=order.__getitem__)
        refs = [p.reference for p in group if p.reference and p.reference not in cands]
        out.append(ArmGroup(tuple(arms[n] for n in cands), tuple(arms[n] for n in dict.fromkeys([*cands, *refs]))))
    return out


def run_id(group: ArmGroup, nightly: bool) -> str:
    # ${BUILDKITE_BUILD_NUMBER} is interpolated by Buildkite when the pipeline is uploaded.
    return f"{'nightly' if nightly else 'ci'}-${{BUILDKITE_BUILD_NUMBER}}-{group.key}"


def step(group: ArmGroup, nightly: bool, queue: str, cpu_queue: str, parallel: bool,
         history: str | None = None, history_reset: str | None = None) -> dict:
    gpus = group.gpus(parallel)
    pool = f"{queue}-{gpus}gpu" if gpus else cpu_queue
    rid = run_id(group, nightly)
    cands = {a.name for a in group.candidates}
    references = [a.name for a in group.arms if a.name not in cands]
    vs = f" vs {', '.join(references)}" if references else ""
    env = {"HARNESS_RUN_ID": rid, "HARNESS_ARMS": ",".join(a.name for a in group.candidates), "CI": "true"}
    artifacts = [f"reports/{rid}/**/*"]
    if nightly:
        env["HARNESS_BASELINE_FROM"] = "previous-nightly"
        # the previous nightly's history is fetched, tonight's run appended and checked, the file kept as an artifact
        env["HARNESS_HISTORY_CHECK"] = "1"
        env["HARNESS_HISTORY"] = history or f"reports/history-{group.key}.sqlite"
        if not history:
            artifacts.append(env["HARNESS_HISTORY"])
        if history_reset:  # the step starts a new store instead of failing on an unfetched one; "$$": no interpolation
            env["HARNESS_HISTORY_RESET"] = history_reset.replace("$", "$$")
    if parallel and len(group.arms) > 1:
        env["HARNESS_PARALLEL"] = "1"
    agents = {"queue": queue, "gpus": str(gpus)} if gpus else {"queue": cpu_queue}
    if group.nodes > 1:
        agents["nodes"] = str(group.nodes)
    startup = sum(a.timeouts.startup_s for a in group.arms)
    return {
        "label": f":vllm: qualify {', '.join(a.name for a in group.candidates)}{vs}",
        "key": f"qualify-{group.key}",
        "command": f"bash {STEP_SCRIPT}",
        "env": env,
        "agents": agents,
        # uploaded by the agent after the command, whether it passed or failed
        "artifact_paths": artifacts,
        "retry": {"automatic": [dict(rule) for rule in AGENT_LOSS_RETRY]},  # copies: no YAML anchors
        "concurrency_group": f"dcp-harness/{pool}",
        "concurrency": 1,
        # server loads plus the suites: generous, so a hung server is the harness's timeout, not Buildkite's
        "timeout_in_minutes": int(startup // 60) + 240,
    }


def pipeline(groups: list[ArmGroup], nightly: bool, queue: str = "gpu", cpu_queue: str = "cpu",
             parallel: bool = False, history: str | None = None, history_reset: str | None = None) -> dict:
    return {"steps": [step(g, nightly, queue, cpu_queue, parallel, history, history_reset) for g in groups]}
