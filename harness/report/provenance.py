"""Run provenance: what run.json records at the start and end of a qualification, and the summary a report shows.

I/O (git, NVML, /proc/cpuinfo, run.json) in the small functions at the top; `summarize_provenance` is pure.
"""

from __future__ import annotations

import json
import platform
import socket
import subprocess
import time
from pathlib import Path

from harness import __version__
from harness.config.errors import HarnessError
from harness.config.paths import REPO_ROOT
from harness.plan.redact import redact_argv, redact_env
from harness.records.schema import Gsm8kRecord, LongPrefixRecord, Record, ServerRecord
from harness.config.workloads import DEFAULT_WORKLOADS, WORKLOAD_KINDS, load_workload, workload_for


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def git_commit() -> str | None:
    """HEAD, with '+modified' when tracked files differ from it: a copied tree (a GPU machine's copy carries a
    stale .git) or uncommitted edits must not pass for the commit."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (head + ("+modified" if dirty else "")) or None


def cpu_model(cpuinfo: str) -> str | None:
    """'model name' of /proc/cpuinfo (pure), with the number of logical CPUs."""
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    return f"{names[0]} x {len(names)}" if names else None


def device_info() -> dict:
    """GPU model(s) and driver through NVML; without a GPU, the CPU model from /proc/cpuinfo."""
    try:
        import pynvml

        pynvml.nvmlInit()
        gpus = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())]
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {"kind": "gpu", "gpus": [g.decode() if isinstance(g, bytes) else g for g in gpus],
                "driver": driver.decode() if isinstance(driver, bytes) else driver}
    except Exception as exc:  # noqa: BLE001 - no NVML library or no GPU: describe the CPU instead
        cpuinfo = Path("/proc/cpuinfo")
        model = cpu_model(cpuinfo.read_text()) if cpuinfo.is_file() else None
        return {"kind": "cpu", "cpu": model or platform.processor() or platform.machine(),
                "no_gpu_reason": f"{type(exc).__name__}: {exc}"}


def workload_dumps(arm) -> dict[str, dict]:
    """Each workload the arm's suites use (sizes, seeds), as resolved now; an unreadable one says why."""
    out = {}
    for key in DEFAULT_WORKLOADS:
        try:
            out[key] = load_workload(workload_for(arm, key), kind=WORKLOAD_KINDS[key]).model_dump(mode="json")
        except HarnessError as exc:
            out[key] = {"error": str(exc)}
    return out


def start_info(arms: dict[str, dict], argv: list[str], suites: list[str], workloads: dict[str, dict]) -> dict:
    return {"harness_version": __version__, "git_commit": git_commit(), "host": socket.gethostname(),
            "started": now(), "argv": redact_argv(argv), "suites": suites, "workloads": workloads, "arms": arms}


def read_run_info(run_dir: Path) -> tuple[dict, list[str]]:
    path = run_dir / "run.json"
    if not path.is_file():
        return {}, [f"{path}: missing: no provenance (harness version, host, arms) for this run"]
    try:
        return json.loads(path.read_text()), []
    except json.JSONDecodeError as exc:
        return {}, [f"{path}: not JSON ({exc.msg} at line {exc.lineno}); provenance unknown"]


def write_run_info(run_dir: Path, info: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(info, indent=2) + "\n")


def finish_run_info(run_dir: Path, exit_code: int, baseline: str | None = None,
                    pytest_exit_code: int | None = None) -> dict:
    """Add the end time, exit code (and pytest's, where a baseline regression changed it) and device to run.json."""
    info, _ = read_run_info(run_dir)
    info.update(finished=now(), exit_code=exit_code, device=device_info(),
                pytest_exit_code=exit_code if pytest_exit_code is None else pytest_exit_code)
    if baseline:
        info["baseline"] = baseline
    write_run_info(run_dir, info)
    return info


def describe_device(device: dict | None) -> str:
    if not device:
        return "not recorded (the run did not finish)"
    if device.get("kind") == "gpu":
        return f"{', '.join(device.get('gpus', []))} (driver {device.get('driver')})"
    return f"CPU: {device.get('cpu')} (no GPU)"


def summarize_provenance(info: dict, records: list[Record]) -> dict:
    """Everything the sign-off needs to say what ran where (pure). Secrets are redacted again on the way out."""
    servers = [r for r in records if isinstance(r, ServerRecord)]
    versions = sorted({r.vllm_version for r in servers if r.vllm_version})
    data = {f"{r.arm}: {name}": sha for r in records if isinstance(r, Gsm8kRecord)
            for name, sha in (r.data_files or {}).items()}
    workloads = {f"{r.arm}: {r.workload}": f"prompts {r.prompts_sha}" for r in records
                 if isinstance(r, LongPrefixRecord)}
    seeds = {name: w.get("seed") for name, w in (info.get("workloads") or {}).items() if "seed" in w}
    return {
        "summary": {
            "Harness": f"{info.get('harness_version', '?')} (git {info.get('git_commit') or 'unknown'})",
            "vLLM": ", ".join(versions) or "unknown (no server came up)",
            "Device": describe_device(info.get("device")),
            "Host": info.get("host", "unknown"),
            "Started": info.get("started", "unknown"),
            "Finished": info.get("finished", "not recorded (interrupted or still running)"),
            "Exit code": str(info.get("exit_code", "n/a")),
            "Command": " ".join(redact_argv(info.get("argv", []))) or "unknown",
            "Workload seeds": ", ".join(f"{k}: {v}" for k, v in seeds.items()) or "n/a",
        },
        "launches": [{"arm": r.arm, "status": r.status, "argv": redact_argv(r.argv), "env": redact_env(r.env)}
                     for r in servers],
        "data_files": data,
        "workloads": workloads,
    }
